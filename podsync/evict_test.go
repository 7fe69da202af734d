package podsync_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// The engine is the eviction manager's Killer.
var _ eviction.Killer = (*podsync.Engine)(nil)

// stopRecorder is the fake runtime, recording the timeout of each
// StopContainer.
type stopRecorder struct {
	*runtimetest.Runtime
	mu       sync.Mutex
	timeouts []time.Duration
}

func (s *stopRecorder) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	s.mu.Lock()
	s.timeouts = append(s.timeouts, timeout)
	s.mu.Unlock()
	return s.Runtime.StopContainer(ctx, id, timeout)
}

func (s *stopRecorder) stops() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.timeouts...)
}

// evictedStatus is what the eviction manager hands its Killer.
func evictedStatus(msg string) corev1.PodStatus {
	return corev1.PodStatus{
		Phase:   corev1.PodFailed,
		Reason:  eviction.Reason,
		Message: msg,
		Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonTerminationByKubelet,
			Message: msg, LastTransitionTime: metav1.NewTime(t0),
		}},
	}
}

func condition(s corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// A running pod evicted with a 5s grace: its containers are stopped with
// it, the DisruptionTarget condition is published before they stop (the
// phase still Running), and the final status is Failed/Evicted with the
// message, the condition, Ready False and the containers terminated. A
// later update (the API copy Failed) does not start it again, and it can
// be evicted only once.
func TestEngineEvict(t *testing.T) {
	h := newHarness(t)
	rec := &stopRecorder{Runtime: h.RT}
	cri, err := cri.New(cri.Options{Runtime: rec, Clock: h.Clock, PodLogRoot: t.TempDir(), PodRoot: t.TempDir(), ResolvConf: "-", HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: cri, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod(corev1.RestartPolicyAlways, "a", "b")
	h.Add(pod)
	if s := h.Writer.Last(pod.UID); s.Phase != corev1.PodRunning {
		t.Fatalf("before the eviction: %+v", s)
	}
	before := len(h.Writer.Statuses[pod.UID])

	const msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	if err := h.Eng.Evict(h.Ctx, pod, evictedStatus(msg), 5); err != nil {
		t.Fatal(err)
	}
	if l, _ := h.Eng.PodLifecycle(pod.UID); l != podsync.Terminating {
		t.Fatalf("lifecycle after Evict %s, want Terminating", l)
	}
	h.Steps(2)

	if l, _ := h.Eng.PodLifecycle(pod.UID); l != podsync.Done {
		t.Fatalf("lifecycle %s, want Done", l)
	}
	if stops := rec.stops(); len(stops) != 2 || stops[0] != 5*time.Second || stops[1] != 5*time.Second {
		t.Errorf("StopContainer timeouts %v, want 5s for each container", stops)
	}
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 0 {
		t.Errorf("%d containers running", n)
	}
	h.Writer.Mu.Lock()
	after := append([]corev1.PodStatus(nil), h.Writer.Statuses[pod.UID][before:]...)
	terminated := append([]types.UID(nil), h.Writer.Terminated...)
	h.Writer.Mu.Unlock()
	if len(after) < 2 {
		t.Fatalf("%d statuses after the eviction, want the condition and the final one", len(after))
	}
	// Every status from the eviction on has the condition; none but the
	// last (nothing runs any more) is terminal.
	for i, s := range after {
		if c := condition(s, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue || c.Reason != corev1.PodReasonTerminationByKubelet || c.Message != msg {
			t.Errorf("status %d: DisruptionTarget %+v", i, c)
		}
		if i < len(after)-1 && (s.Phase != corev1.PodRunning || s.Reason != "") {
			t.Errorf("status %d while stopping: phase %s reason %q, want Running", i, s.Phase, s.Reason)
		}
	}
	s := after[len(after)-1]
	if s.Phase != corev1.PodFailed || s.Reason != eviction.Reason || s.Message != msg {
		t.Errorf("final status: phase %s reason %q message %q", s.Phase, s.Reason, s.Message)
	}
	if c := condition(s, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "PodFailed" {
		t.Errorf("final Ready %+v", c)
	}
	for _, cs := range s.ContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != runtimetest.StopExitCode {
			t.Errorf("container %s: state %+v, want terminated with 137", cs.Name, cs.State)
		}
	}
	if len(terminated) != 1 {
		t.Errorf("PodTerminated calls %v", terminated)
	}

	// The API copy turns Failed: the update neither starts the pod again
	// nor changes its status.
	h.RT.ResetCalls()
	failed := pod.DeepCopy()
	failed.Status = s
	failed.Labels = map[string]string{"v": "2"}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{failed}})
	h.Steps(3)
	for _, c := range h.RT.Calls() {
		if c.Method == "RunPodSandbox" || c.Method == "CreateContainer" || c.Method == "StartContainer" {
			t.Errorf("after the update: %s %s", c.Method, c.ID)
		}
	}
	if l, _ := h.Eng.PodLifecycle(pod.UID); l != podsync.Done {
		t.Errorf("lifecycle after the update %s", l)
	}
	if got := h.Writer.Last(pod.UID); got.Phase != corev1.PodFailed || got.Reason != eviction.Reason {
		t.Errorf("status after the update %+v", got)
	}

	// Done, unknown and nil pods are not evicted.
	if err := h.Eng.Evict(h.Ctx, pod, evictedStatus(msg), 1); !errors.Is(err, podsync.ErrPodNotActive) || !strings.Contains(err.Error(), "default/web") {
		t.Errorf("Evict of a Done pod: %v", err)
	}
	other := busyboxPod(corev1.RestartPolicyAlways, "a")
	other.Name, other.UID = "other", "uid-other"
	if err := h.Eng.Evict(h.Ctx, other, evictedStatus(msg), 1); !errors.Is(err, podsync.ErrPodNotActive) || !strings.Contains(err.Error(), "default/other") {
		t.Errorf("Evict of an unknown pod: %v", err)
	}
	if err := h.Eng.Evict(h.Ctx, nil, evictedStatus(msg), 1); !errors.Is(err, podsync.ErrPodNotActive) {
		t.Errorf("Evict of nil: %v", err)
	}
}

// A pod already terminating with a long grace (deleted with 30s) and then
// evicted with 1s is stopped with the shorter grace; the eviction's
// status is its final status.
func TestEngineEvictTerminating(t *testing.T) {
	var rec calls
	pod := testPod(corev1.RestartPolicyAlways, "a")
	var eng *podsync.Engine
	syncer := podsync.SyncerFuncs{
		Sync: func(context.Context, *corev1.Pod, *podsync.PodState) (podsync.SyncResult, error) {
			return podsync.SyncResult{}, nil
		},
		Terminating: func(ctx context.Context, _ *corev1.Pod, _ *podsync.PodState, grace time.Duration) error {
			rec.Add("terminating " + grace.String())
			if grace == 30*time.Second {
				// Evicted while the deletion's termination runs: that
				// one is cancelled and starts again with 1s.
				if err := eng.Evict(ctx, pod, evictedStatus("low"), 1); err != nil {
					t.Error(err)
				}
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		},
		Terminated: func(context.Context, *corev1.Pod, *podsync.PodState) error { return nil },
	}
	h := newHarness(t)
	var err error
	eng, err = podsync.New(podsync.Options{Syncer: syncer, Relister: relisterFunc(func(context.Context) (map[types.UID]*podsync.PodState, error) { return nil, nil }),
		Clock: h.Clock, Writer: h.Writer})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng = eng
	h.Add(pod)
	del := pod.DeepCopy()
	now := metav1.NewTime(t0)
	g := int64(30)
	del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &now, &g
	eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: []*corev1.Pod{del}})
	h.Steps(3) // terminating (cancelled), terminating again, terminated
	if got := strings.Join(rec.Get(), ","); got != "terminating 30s,terminating 1s" {
		t.Errorf("calls %s", got)
	}
	if s := h.Writer.Last(pod.UID); s.Phase != corev1.PodFailed || s.Reason != eviction.Reason || condition(s, corev1.DisruptionTarget) == nil {
		t.Errorf("final status %+v", s)
	}
	if l, _ := eng.PodLifecycle(pod.UID); l != podsync.Done {
		t.Errorf("lifecycle %s", l)
	}
}

// With the status writer on the fake clientset, an evicted API pod ends
// Failed/Evicted in the API with the DisruptionTarget condition.
func TestEngineEvictWrittenToAPI(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	pod := admitPod("web", 0)
	pod.Namespace, pod.Spec.NodeName = "default", "n1"
	client := fake.NewClientset(pod)
	writer, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }, Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: writer, Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	api, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Add(api)
	if _, err := writer.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Eng.Evict(ctx, api, evictedStatus("low on memory"), 1); err != nil {
		t.Fatal(err)
	}
	h.Steps(2)
	if _, err := writer.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := got.Status
	if s.Phase != corev1.PodFailed || s.Reason != eviction.Reason || s.Message != "low on memory" {
		t.Fatalf("API status: phase %s reason %q message %q", s.Phase, s.Reason, s.Message)
	}
	if c := condition(s, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue || c.Reason != corev1.PodReasonTerminationByKubelet {
		t.Errorf("API DisruptionTarget %+v", c)
	}
}

// ActivePods holds the admitted pods that run or stop: not a rejected pod,
// an orphan, or a pod whose worker is Done.
func TestEngineActivePods(t *testing.T) {
	h := newHarness(t)
	orphan := admitPod("orphan", 0)
	h.Add(orphan)

	// A new engine on the same runtime: orphan is an orphan, whose stop
	// fails once, so that it stays Terminating.
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return admitNode(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, Admit: preds})
	if err != nil {
		t.Fatal(err)
	}
	fail := runtimetest.Errors(errors.New("stuck"))
	h.RT.SetHooks(runtimetest.Hooks{StopContainer: func(context.Context, string, time.Duration) error { return fail() }})
	h.Steps(1)
	if l, ok := h.Eng.PodLifecycle(orphan.UID); !ok || l != podsync.Terminating {
		t.Fatalf("orphan: lifecycle %v %v, want Terminating", l, ok)
	}

	a, b, big := admitPod("a", time.Second), busyboxPod(corev1.RestartPolicyNever, "app"), admitPod("big", 3*time.Second)
	b.Name, b.UID, b.CreationTimestamp = "b", "uid-b", metav1.NewTime(t0.Add(2*time.Second))
	big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{a, b, big}})
	h.Steps(2)
	if got := podNames(h.Eng.ActivePods()); got != "a,b" {
		t.Fatalf("active pods %q, want a,b", got)
	}
	// b's container exits 0: b is Done.
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		if c.Labels["io.kubernetes.pod.name"] == "b" {
			if err := h.RT.Exit(c.Id, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.Steps(3)
	if l, _ := h.Eng.PodLifecycle(b.UID); l != podsync.Done {
		t.Fatalf("b: lifecycle %s, want Done", l)
	}
	if got := podNames(h.Eng.ActivePods()); got != "a" {
		t.Fatalf("active pods %q, want a", got)
	}
	// An evicted pod is active while it stops.
	if err := h.Eng.Evict(h.Ctx, a, evictedStatus("low"), 1); err != nil {
		t.Fatal(err)
	}
	if got := podNames(h.Eng.ActivePods()); got != "a" {
		t.Fatalf("active pods while a stops %q, want a", got)
	}
	// Rejected pods and orphans are not evicted.
	for _, p := range []*corev1.Pod{big, orphan} {
		if err := h.Eng.Evict(h.Ctx, p, evictedStatus("low"), 1); !errors.Is(err, podsync.ErrPodNotActive) {
			t.Errorf("Evict %s: %v", p.Name, err)
		}
	}
	h.Steps(2)
	if got := podNames(h.Eng.ActivePods()); got != "" {
		t.Fatalf("active pods %q, want none", got)
	}
}

func podNames(pods []*corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}
