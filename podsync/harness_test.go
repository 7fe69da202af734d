package podsync_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// The engine's tests outside package podsync run it on the CRI syncer over
// the in-memory runtime; these are their fixtures (those of podsync's own
// tests, and cri's harness). export_test.go gives them the engine's insides.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	pod.Spec.RestartPolicy = policy
	pod.Spec.HostNetwork = true
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox:1.36"})
	}
	return pod
}

func withInit(pod *corev1.Pod, sidecar bool, names ...string) *corev1.Pod {
	for _, n := range names {
		c := corev1.Container{Name: n, Image: "busybox:1.36"}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	return pod
}

func withEphemeral(pod *corev1.Pod, names ...string) *corev1.Pod {
	for _, n := range names {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: "busybox:1.36"}, TargetContainerName: "a"})
	}
	return pod
}

func readySandbox() *podsync.SandboxState {
	return &podsync.SandboxState{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, HostNetwork: true, CreatedAt: t0}
}

func running(pod *corev1.Pod, name string) *podsync.ContainerState {
	return &podsync.ContainerState{ID: "c-" + name, SandboxID: "sb1", Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Hash: podsync.HashContainer(&corev1.Container{Name: name, Image: "busybox:1.36"}), StartedAt: t0}
}

func exited(pod *corev1.Pod, name string, code int32) *podsync.ContainerState {
	c := running(pod, name)
	c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, t0.Add(time.Second)
	return c
}

type fakeProbes map[string]probe.Update // "name/Type"

func (f fakeProbes) Latest(_ types.UID, name string, t probe.Type) (probe.Update, bool) {
	u, ok := f[name+"/"+t.String()]
	return u, ok
}
func (f fakeProbes) UpdatePodStatus(*corev1.Pod, *corev1.PodStatus) {}

func cond(s corev1.PodStatus, t corev1.PodConditionType) string {
	for _, c := range s.Conditions {
		if c.Type == t {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return "missing"
}

// recordingWriter is a StatusWriter that keeps what it was given.
type recordingWriter struct {
	mu         sync.Mutex
	statuses   map[types.UID][]corev1.PodStatus
	terminated []types.UID
	removed    []types.UID
}

func (r *recordingWriter) SetPodStatus(pod *corev1.Pod, s corev1.PodStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statuses == nil {
		r.statuses = map[types.UID][]corev1.PodStatus{}
	}
	r.statuses[pod.UID] = append(r.statuses[pod.UID], s)
}
func (r *recordingWriter) PodTerminated(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terminated = append(r.terminated, pod.UID)
}
func (r *recordingWriter) RemovePod(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, uid)
}

// sawWaiting reports whether any status written for uid had its first
// container waiting for reason.
func (r *recordingWriter) sawWaiting(uid types.UID, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.statuses[uid] {
		if w := s.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == reason {
			return true
		}
	}
	return false
}

func (r *recordingWriter) last(uid types.UID) corev1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.statuses[uid]
	if len(s) == 0 {
		return corev1.PodStatus{}
	}
	return s[len(s)-1]
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	clock  *clocktesting.FakeClock
	rt     *runtimetest.Runtime
	cri    *cri.Syncer
	eng    *podsync.Engine
	writer *recordingWriter
	// logRoot is the syncer's PodLogRoot.
	logRoot string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), clock: clocktesting.NewFakeClock(t0), writer: &recordingWriter{}}
	h.rt = runtimetest.New(runtimetest.Options{Clock: h.clock})
	h.newEngine()
	return h
}

func (h *harness) newEngine() {
	dir := h.t.TempDir()
	h.logRoot = dir + "/logs"
	var err error
	h.cri, err = cri.New(cri.Options{Runtime: h.rt, Clock: h.clock, PodLogRoot: h.logRoot, PodRoot: dir + "/pods", ResolvConf: "-", HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.eng, err = podsync.New(podsync.Options{Syncer: h.cri, Writer: h.writer, Clock: h.clock, HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		h.t.Fatal(err)
	}
}

// add hands the engine pod and runs two steps (sync, relist and sync).
func (h *harness) add(pod *corev1.Pod) {
	h.t.Helper()
	h.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.steps(2)
}

// steps runs n engine steps.
func (h *harness) steps(n int) {
	h.t.Helper()
	for range n {
		h.eng.RelistNow() // the runtime changes behind the engine's back
		if _, err := h.eng.SyncOnce(h.ctx); err != nil {
			h.t.Fatalf("SyncOnce: %v", err)
		}
	}
}

func (h *harness) containers(state runtimeapi.ContainerState) []*runtimeapi.Container {
	cs, err := h.rt.ListContainers(h.ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: state}})
	if err != nil {
		h.t.Fatal(err)
	}
	return cs
}

func busyboxPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	p := testPod(policy, names...)
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Image = runtimetest.BusyboxImage
		p.Spec.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
	}
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].Image = runtimetest.BusyboxImage
	}
	return p
}

type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

func (c *calls) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

type relisterFunc func(context.Context) (map[types.UID]*podsync.PodState, error)

func (f relisterFunc) Relist(ctx context.Context) (map[types.UID]*podsync.PodState, error) {
	return f(ctx)
}
