package nodekit_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
)

// fleetPods is a fleet of hollow nodes running API pods under a fake clock,
// on a fake clientset.
type fleetPods struct {
	t     *testing.T
	ctx   context.Context
	clock *clocktesting.FakeClock
	cs    *fake.Clientset
	pods  *nodekit.FleetPods
	fleet *fleet.Fleet
	stop  func()    // stops the shared watch; again is a no-op
	sims  *sync.Map // node name -> *podsynctest.Backend
}

func (h *fleetPods) sim(node string) *podsynctest.Backend {
	b, _ := h.sims.Load(node)
	return b.(*podsynctest.Backend)
}

// simStages: "init" runs 2s and exits 0, "crash" runs 5s and exits 1, the
// rest start 1s after they are created and run until stopped.
func simStages(_ *corev1.Pod, c string) podsynctest.Stages {
	switch c {
	case "init":
		return podsynctest.Stages{RunFor: 2 * time.Second}
	case "crash":
		return podsynctest.Stages{RunFor: 5 * time.Second, ExitCode: 1}
	}
	return podsynctest.Stages{StartDelay: time.Second, StopExitCode: 137}
}

// newFleetPods makes the fleet; mod (when set) adjusts the pods' options,
// and setters (when set) returns the fleet's Options.Setters, called after
// mod.
func newFleetPods(t *testing.T, nodes int, mod func(*nodekit.FleetPodsOptions, *fleet.Options, *sync.Map)) *fleetPods {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var sims sync.Map
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := heartbeattest.UIDClientset(fake.NewClientset())
	o := nodekit.FleetPodsOptions{
		API: &nodekit.API{Pods: func(ns string) nodekit.PodClient { return cs.CoreV1().Pods(ns) }},
		Backend: func(n fleet.PodNode, podIP func(*corev1.Pod) string) podsync.BackendFunc {
			sim := podsynctest.New(podsynctest.Options{Clock: clock, Stages: simStages, PodIP: podIP, RuntimeName: "sim-" + n.Name})
			sims.Store(n.Name, sim)
			return func(podsync.BackendParts) (podsync.Backend, error) { return podsync.Backend{Syncer: sim}, nil }
		},
		Clock: clock,
	}
	fo := fleet.Options{Count: nodes, Clock: clock, Nodes: cs.CoreV1().Nodes(),
		Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace)}
	if mod != nil {
		mod(&o, &fo, &sims)
	}
	fp, err := nodekit.NewFleetPods(o)
	if err != nil {
		t.Fatal(err)
	}
	fo.Pods = fp.Node
	f, err := fleet.New(fo)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fp.Run(ctx)
	}()
	var once sync.Once
	h := &fleetPods{t: t, ctx: ctx, sims: &sims, clock: clock, cs: cs, pods: fp, fleet: f, stop: func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}}
	t.Cleanup(h.stop)
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the shared watch's first list", fp.Shared().Synced)
	return h
}

// until steps the fleet by a second at a time (at most max) until cond
// holds; the shared watch delivers on its own goroutine, so each step also
// waits for it a moment with a deadline.
func (h *fleetPods) until(what string, max time.Duration, cond func() bool) {
	h.t.Helper()
	for waited := time.Duration(0); ; waited += time.Second {
		ok := false
		testenv.Eventually(h.t, 10*time.Second, time.Millisecond, what, func() bool {
			if err := h.fleet.SyncOnce(h.ctx); err != nil {
				h.t.Fatal(err)
			}
			ok = cond()
			return true
		})
		if ok {
			return
		}
		if waited >= max {
			h.t.Fatalf("%s: not within %v of the fleet's time", what, max)
		}
		if err := h.fleet.Step(h.ctx, time.Second); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *fleetPods) create(pod *corev1.Pod) {
	h.t.Helper()
	if _, err := h.cs.CoreV1().Pods(pod.Namespace).Create(h.ctx, pod, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fleetPods) get(name string) *corev1.Pod {
	p, err := h.cs.CoreV1().Pods("default").Get(h.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func boundPod(name, node string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyAlways}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "sim/" + c})
	}
	return p
}

// Pods bound to hollow nodes go through the kubelet's lifecycle: init
// containers in order, then a sidecar and the app, Running and Ready; a
// crashing container restarts with back-off; a graceful deletion stops the
// pod and the status writer deletes it; each pod's IP is from its node's range.
func TestFleetPodsLifecycle(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newFleetPods(t, 3, nil)
	defer h.stop()
	web := boundPod("web", "node-1", "app")
	web.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "sim/init"}}
	always := corev1.ContainerRestartPolicyAlways
	web.Spec.InitContainers = append(web.Spec.InitContainers, corev1.Container{Name: "side", Image: "sim/side", RestartPolicy: &always})
	h.create(web)
	h.create(boundPod("crashy", "node-2", "crash"))
	for i := range 3 {
		h.create(boundPod(fmt.Sprintf("plain-%d", i), fmt.Sprintf("node-%d", i), "app"))
	}

	h.until("web Running and Ready", 30*time.Second, func() bool { return podReady(h.get("web")) })
	p := h.get("web")
	if s := p.Status.InitContainerStatuses; len(s) != 2 || s[0].State.Terminated == nil || s[0].State.Terminated.Reason != "Completed" ||
		s[1].State.Running == nil || s[1].Started == nil || !*s[1].Started {
		t.Errorf("init containers: %+v", s)
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !netip.MustParsePrefix("10.0.1.0/24").Contains(ip) {
		t.Errorf("web's pod IP %q, want one of node-1's 10.0.1.0/24", p.Status.PodIP)
	}
	if p.Status.HostIP != "10.0.1.1" {
		t.Errorf("web's host IP %q, want 10.0.1.1", p.Status.HostIP)
	}
	for i := range 3 {
		name := fmt.Sprintf("plain-%d", i)
		h.until(name+" Ready", 10*time.Second, func() bool { return podReady(h.get(name)) })
	}

	// crashy's container exits 1 after 5s and is restarted after 10s,
	// then 20s.
	h.until("crashy restarted twice", 2*time.Minute, func() bool {
		p := h.get("crashy")
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	h.until("crashy in back-off", 30*time.Second, func() bool {
		s := h.get("crashy").Status.ContainerStatuses[0]
		return s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff"
	})

	// A graceful deletion, as the API server makes it: the deletion
	// timestamp and grace period set; the node stops the pod and deletes
	// it for good.
	p = h.get("web")
	now := metav1.NewTime(h.clock.Now())
	grace := int64(30)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := h.cs.CoreV1().Pods("default").Update(h.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until("web deleted", 10*time.Second, func() bool { return h.get("web") == nil })
	h.until("web gone from node-1's simulation", 10*time.Second, func() bool { return !slices.Contains(h.sim("node-1").Pods(), web.UID) })
	if s := h.fleet.Stats(); s.PodSteps == 0 || s.PodErrors != 0 {
		t.Errorf("stats %+v: want pod steps and no errors", s)
	}
}

// A pod half with a loop of its own cannot be a fleet's node: the error
// names it.
func TestFleetPodsRefusesLoops(t *testing.T) {
	cs := fake.NewClientset()
	fp, err := nodekit.NewFleetPods(nodekit.FleetPodsOptions{
		API: &nodekit.API{Pods: func(ns string) nodekit.PodClient { return cs.CoreV1().Pods(ns) }},
		Backend: func(fleet.PodNode, func(*corev1.Pod) string) podsync.BackendFunc {
			return func(podsync.BackendParts) (podsync.Backend, error) {
				return podsync.Backend{Syncer: podsynctest.New(podsynctest.Options{}),
					Runnables: []podsync.BackendRunnable{{Name: "pod data", Run: func(context.Context) error { return nil }}}}, nil
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = fp.Node(fleet.PodNode{Name: "node-0", Node: func() *corev1.Node { return nil }, Trigger: func() {}})
	if err == nil || !strings.Contains(err.Error(), "backend loop pod data") {
		t.Fatalf("err %v, want one naming the backend loop", err)
	}
}
