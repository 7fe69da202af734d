package podsync_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// admitNode is a node with room for two pods, labelled zone=a.
func admitNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		}},
	}
}

func admitPod(name string, created time.Duration) *corev1.Pod {
	p := busyboxPod(corev1.RestartPolicyAlways, "app")
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.CreationTimestamp = metav1.NewTime(t0.Add(created))
	p.Annotations = map[string]string{podsource.ConfigSourceAnnotation: podsource.APISource}
	return p
}

func newAdmitHarness(t *testing.T, rec record.EventRecorder) *harness {
	t.Helper()
	h := newHarness(t)
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return admitNode(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"}, Admit: preds, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) sandboxNames() []string {
	h.t.Helper()
	sbs, err := h.RT.ListPodSandbox(h.Ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			names = append(names, sb.Metadata.Name)
		}
	}
	return names
}

// Pods that arrive together are admitted oldest first; the youngest does
// not fit in max pods and is rejected with kubelet's OutOfpods, a pod for
// another zone with NodeAffinity; neither ever runs, both are Failed with
// the reason and a Warning event, and a later update does not run them.
// Once an admitted pod is gone, a new pod fits again.
func TestEngineAdmission(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	h := newAdmitHarness(t, rec)
	young, old, older := admitPod("young", 3*time.Second), admitPod("old", 2*time.Second), admitPod("older", time.Second)
	elsewhere := admitPod("elsewhere", 0)
	elsewhere.Spec.NodeSelector = map[string]string{"zone": "b"}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{young, old, older, elsewhere}})
	h.Steps(3)

	if got := strings.Join(h.sandboxNames(), ","); got != "old,older" && got != "older,old" {
		t.Fatalf("running sandboxes %q, want old and older", got)
	}
	for _, tc := range []struct {
		pod             *corev1.Pod
		reason, message string
	}{
		{young, "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"},
		{elsewhere, "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
	} {
		s := h.Writer.Last(tc.pod.UID)
		if s.Phase != corev1.PodFailed || s.Reason != tc.reason || s.Message != "Pod was rejected: "+tc.message || s.QOSClass != corev1.PodQOSBestEffort {
			t.Errorf("%s: status %+v", tc.pod.Name, s)
		}
		if life, ok := h.Eng.PodLifecycle(tc.pod.UID); !ok || life != podsync.Done {
			t.Errorf("%s: lifecycle %v %v, want Done", tc.pod.Name, life, ok)
		}
	}
	// The admitted pods' status is theirs.
	if s := h.Writer.Last(old.UID); s.Phase != corev1.PodRunning {
		t.Errorf("old: status %+v", s)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	want := []string{
		"Warning NodeAffinity Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		"Warning OutOfpods Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
	}
	if strings.Join(events, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}

	// An update of a rejected pod neither admits nor runs it.
	young2 := young.DeepCopy()
	young2.Labels = map[string]string{"v": "2"}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Source: podsource.APISource, Pods: []*corev1.Pod{young2}})
	h.Steps(2)
	if n := len(h.sandboxNames()); n != 2 {
		t.Fatalf("%d sandboxes after an update of a rejected pod, want 2", n)
	}

	// old goes; a new pod fits once old's worker is gone.
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Source: podsource.APISource, Pods: []*corev1.Pod{old}})
	h.Steps(4)
	newer := admitPod("newer", 4*time.Second)
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{newer}})
	h.Steps(3)
	if got := strings.Join(h.sandboxNames(), ","); got != "newer,older" && got != "older,newer" {
		t.Fatalf("running sandboxes %q, want newer and older", got)
	}
	// A rejected pod that goes is forgotten.
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Source: podsource.APISource, Pods: []*corev1.Pod{young2, elsewhere}})
	if _, ok := h.Eng.PodLifecycle(young.UID); ok {
		t.Error("removed rejected pod still known")
	}
}

// Without podsync.Options.Admit every pod runs, whatever it asks for.
func TestEngineNoAdmission(t *testing.T) {
	h := newHarness(t)
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c"} {
		p := admitPod(n, 0)
		p.Spec.NodeSelector = map[string]string{"zone": "nowhere"}
		pods = append(pods, p)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: pods})
	h.Steps(3)
	if n := len(h.sandboxNames()); n != 3 {
		t.Fatalf("%d sandboxes, want 3", n)
	}
}

// With the status writer on the fake clientset: a rejected API pod is
// Failed in the API with kubelet's reason and message, and once deleted it
// is deleted for good (the writer's final delete), though it never ran.
func TestEngineRejectedAPIPodWrittenAndDeleted(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	pod := admitPod("big", 0)
	pod.Spec.NodeName = "n1"
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	client := fake.NewClientset(pod)
	writer, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }, Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return admitNode(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: writer, Clock: h.Clock, Admit: preds})
	if err != nil {
		t.Fatal(err)
	}
	api, err := client.CoreV1().Pods("default").Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{api}})
	h.Steps(2)
	if _, err := writer.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Pods("default").Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Status; s.Phase != corev1.PodFailed || s.Reason != "OutOfcpu" ||
		s.Message != "Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000" {
		t.Fatalf("API status %+v", s)
	}
	if n := len(h.sandboxNames()); n != 0 {
		t.Fatalf("%d sandboxes for a rejected pod", n)
	}

	// Deletion: the API source sends the pod with its deletion timestamp.
	deleting := got.DeepCopy()
	now := metav1.NewTime(h.Clock.Now())
	grace := int64(30)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	deleting.ResourceVersion = "999"
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Source: podsource.APISource, Pods: []*corev1.Pod{deleting}})
	for range 3 {
		if _, err := writer.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var deleted bool
	for _, a := range client.Actions() {
		deleted = deleted || (a.GetVerb() == "delete" && a.GetResource().Resource == "pods")
	}
	if !deleted {
		t.Fatalf("the rejected pod was not deleted; actions %v", client.Actions())
	}
}

// An engine started on a runtime that already runs pods (a restarted agent)
// admits them again; one that no longer fits is stopped, not left running.
func TestEngineRejectedPodThatRunsIsStopped(t *testing.T) {
	h := newHarness(t)
	a, b := admitPod("a", time.Second), admitPod("b", 2*time.Second)
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{a, b}})
	h.Steps(3)
	if n := len(h.sandboxNames()); n != 2 {
		t.Fatalf("%d sandboxes before the restart, want 2", n)
	}

	// The restarted engine's node takes one pod.
	node := admitNode()
	node.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return node, nil }})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, Admit: preds, Sources: []string{podsource.APISource}})
	if err != nil {
		t.Fatal(err)
	}
	h.Steps(1) // the first relist comes before the first update, as in Run
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{b, a}})
	h.Steps(4)
	if got := strings.Join(h.sandboxNames(), ","); got != "a" {
		t.Fatalf("running sandboxes %q, want only a", got)
	}
	if s := h.Writer.Last(b.UID); s.Phase != corev1.PodFailed || s.Reason != "OutOfpods" {
		t.Fatalf("b: status %+v", s)
	}
}

// A static pod on a node whose two pod slots are taken is admitted by
// preempting the best-effort pod (the burstable one is spared): the victim
// is stopped with kubelet's Failed/Preempting status, DisruptionTarget
// condition and Warning event, and the static pod starts only once the
// victim is stopped (its first stop fails here, so it takes a retry).
func TestEnginePreemptsForCriticalPod(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	h := newAdmitHarness(t, rec)
	reg := prometheus.NewRegistry()
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return admitNode(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, Admit: preds, Recorder: rec, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	bestEffort, burstable := admitPod("besteffort", time.Second), admitPod("burstable", 2*time.Second)
	burstable.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{bestEffort, burstable}})
	h.Steps(3)
	if n := len(h.sandboxNames()); n != 2 {
		t.Fatalf("%d sandboxes running, want 2", n)
	}

	static := admitPod("static-n1", 3*time.Second)
	static.Annotations[podsource.ConfigSourceAnnotation] = podsource.FileSource
	fail := runtimetest.Errors(errors.New("runtime busy"))
	h.RT.SetHooks(runtimetest.Hooks{StopContainer: func(context.Context, string, time.Duration) error { return fail() }})
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.FileSource, Pods: []*corev1.Pod{static}})
	h.Steps(3)
	if life, _ := h.Eng.PodLifecycle(bestEffort.UID); life != podsync.Terminating {
		t.Fatalf("victim %v, want Terminating after a failed stop", life)
	}
	if got := strings.Join(h.sandboxNames(), ","); strings.Contains(got, "static") {
		t.Fatalf("the static pod started before its victim stopped: %s", got)
	}
	// The DisruptionTarget condition shows while the victim stops.
	if s := h.Writer.Last(bestEffort.UID); s.Phase == corev1.PodFailed || !hasCondition(s, corev1.DisruptionTarget, "TerminationByKubelet") {
		t.Errorf("victim status while stopping: %+v", s)
	}
	h.Clock.Step(time.Second)
	h.Steps(4)
	if got := strings.Join(h.sandboxNames(), ","); got != "burstable,static-n1" && got != "static-n1,burstable" {
		t.Fatalf("running sandboxes %q, want burstable and static-n1", got)
	}
	if life, _ := h.Eng.PodLifecycle(bestEffort.UID); life != podsync.Done {
		t.Errorf("victim %v, want Done", life)
	}
	s := h.Writer.Last(bestEffort.UID)
	if s.Phase != corev1.PodFailed || s.Reason != "Preempting" || s.Message != "Preempted in order to admit critical pod" {
		t.Errorf("victim status %+v", s)
	}
	var cond *corev1.PodCondition
	for i := range s.Conditions {
		if s.Conditions[i].Type == corev1.DisruptionTarget {
			cond = &s.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "TerminationByKubelet" ||
		cond.Message != "Pod was preempted by Kubelet to accommodate a critical pod." || cond.LastTransitionTime.IsZero() {
		t.Errorf("victim DisruptionTarget condition %+v", cond)
	}
	if s := h.Writer.Last(static.UID); s.Phase != corev1.PodRunning {
		t.Errorf("static pod status %+v", s)
	}
	if s := h.Writer.Last(burstable.UID); s.Phase != corev1.PodRunning {
		t.Errorf("spared pod status %+v", s)
	}
	select {
	case ev := <-rec.Events:
		if ev != "Warning Preempting Preempted in order to admit critical pod" {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no Preempting event")
	}
	if v := testutil.ToFloat64(podsync.Preemptions(h.Eng).WithLabelValues("pods")); v != 1 {
		t.Errorf("kubelet_preemptions{preemption_signal=pods} = %v, want 1", v)
	}

	// A second critical pod finds only critical and burstable pods: it
	// preempts the burstable one. A third finds nothing to preempt and is
	// rejected as kubelet rejects it.
	crit := admitPod("system", 4*time.Second)
	prio := int32(admission.SystemCriticalPriority)
	crit.Spec.Priority = &prio
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{crit}})
	h.Steps(4)
	if got := strings.Join(h.sandboxNames(), ","); got != "static-n1,system" && got != "system,static-n1" {
		t.Fatalf("running sandboxes %q, want static-n1 and system", got)
	}
	if s := h.Writer.Last(burstable.UID); s.Reason != "Preempting" {
		t.Errorf("burstable pod status %+v", s)
	}
	static2 := admitPod("other-n1", 5*time.Second)
	static2.Annotations[podsource.ConfigSourceAnnotation] = podsource.FileSource
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.FileSource, Pods: []*corev1.Pod{static2}})
	h.Steps(2)
	if s := h.Writer.Last(static2.UID); s.Phase != corev1.PodFailed || s.Reason != "UnexpectedAdmissionError" {
		t.Errorf("critical pod with nothing to preempt: %+v", s)
	}
}

func hasCondition(s corev1.PodStatus, typ corev1.PodConditionType, reason string) bool {
	for _, c := range s.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// A victim that cannot be stopped holds the critical pod back only for
// the longest of the victims' grace periods × 1.5, at least 10s, as
// kubelet's wait for a kill times out.
func TestEnginePreemptionWaitEnds(t *testing.T) {
	h := newAdmitHarness(t, nil)
	one := int64(1)
	a, b := admitPod("a", time.Second), admitPod("b", 2*time.Second)
	a.Spec.TerminationGracePeriodSeconds, b.Spec.TerminationGracePeriodSeconds = &one, &one
	b.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{a, b}})
	h.Steps(3)
	static := admitPod("static-n1", 3*time.Second)
	static.Annotations[podsource.ConfigSourceAnnotation] = podsource.FileSource
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.FileSource, Pods: []*corev1.Pod{static}})
	for i := 0; i < 9; i++ {
		fail := runtimetest.Errors(errors.New("stuck"))
		h.RT.SetHooks(runtimetest.Hooks{StopContainer: func(context.Context, string, time.Duration) error { return fail() }})
		h.Steps(2)
		if strings.Contains(strings.Join(h.sandboxNames(), ","), "static") {
			t.Fatalf("the static pod started %ds after its admission, while its victim stops", i)
		}
		h.Clock.Step(time.Second)
	}
	fail := runtimetest.Errors(errors.New("stuck"))
	h.RT.SetHooks(runtimetest.Hooks{StopContainer: func(context.Context, string, time.Duration) error { return fail() }})
	h.Clock.Step(time.Second)
	h.Steps(3)
	if life, _ := h.Eng.PodLifecycle(a.UID); life != podsync.Terminating {
		t.Fatalf("victim %v, want still Terminating", life)
	}
	if !strings.Contains(strings.Join(h.sandboxNames(), ","), "static-n1") {
		t.Fatalf("the static pod did not start once the wait ended: %v", h.sandboxNames())
	}
}
