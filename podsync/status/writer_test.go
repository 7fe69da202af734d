package status_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/status"
)

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    status.Options
		err  string
	}{
		{"defaults", status.Options{}, ""},
		{"reconcile too short", status.Options{ReconcilePeriod: 10}, "status: Options.ReconcilePeriod 10ns must be in [1s, 1h0m0s]"},
		{"reconcile too long", status.Options{ReconcilePeriod: 2 * time.Hour}, "status: Options.ReconcilePeriod 2h0m0s must be in [1s, 1h0m0s]"},
		{"backoff too short", status.Options{RetryBackoff: time.Nanosecond}, "status: Options.RetryBackoff 1ns must be in [10ms, 10s]"},
		{"backoff above max", status.Options{RetryBackoff: 2 * time.Second, MaxRetryBackoff: time.Second}, "status: Options.RetryBackoff 2s must be in [10ms, 1s]"},
		{"max too long", status.Options{MaxRetryBackoff: time.Hour}, "status: Options.MaxRetryBackoff 1h0m0s must be in [10ms, 10m0s]"},
		{"backoff above default max", status.Options{RetryBackoff: time.Minute}, ""},
		{"max below default backoff", status.Options{MaxRetryBackoff: 100 * time.Millisecond}, ""},
		{"no parallel writes", status.Options{MaxParallelWrites: -1}, "status: Options.MaxParallelWrites -1 must be in [1, 100]"},
		{"too many parallel writes", status.Options{MaxParallelWrites: 101}, "status: Options.MaxParallelWrites 101 must be in [1, 100]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := status.New(tc.o)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Fatalf("New: error %v, want %q", err, tc.err)
			}
		})
	}
}

// The patch names the pod's UID and nothing else of its metadata, and
// carries only what changed.
func TestPatchCarriesOnlyChangesAndUID(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, pendingStatus())
	acts := e.sync()
	if got := verbs(acts); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Fatalf("actions %v, want one status patch", got)
	}
	p := patchOf(t, acts[0])
	if md := p["metadata"]; !reflect.DeepEqual(md, map[string]any{"uid": "uid-1"}) {
		t.Errorf("metadata %v, want only the uid", md)
	}
	if _, ok := p["status"].(map[string]any)["phase"]; ok {
		t.Errorf("phase Pending sent though the API has it: %v", p["status"])
	}
	if _, ok := p["status"].(map[string]any)["qosClass"]; ok {
		t.Errorf("qosClass sent though the API has it: %v", p["status"])
	}

	e.w.SetPodStatus(pod, runningStatus(false))
	acts = e.sync()
	if len(acts) != 1 {
		t.Fatalf("actions %v, want one patch", verbs(acts))
	}
	st := patchOf(t, acts[0])["status"].(map[string]any)
	var keys []string
	for k := range st {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if want := []string{"conditions", "containerStatuses", "phase", "podIP", "podIPs"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("patched %v, want %v", keys, want)
	}
	// Only the condition that changed, without an element order list.
	conds := st["conditions"].([]any)
	if len(conds) != 1 || conds[0].(map[string]any)["type"] != string(corev1.PodReadyToStartContainers) {
		t.Errorf("conditions %v, want only PodReadyToStartContainers", conds)
	}
	got := e.get("web")
	if got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "10.244.0.5" || len(got.Status.Conditions) != 5 {
		t.Errorf("API status %+v", got.Status)
	}
}

func TestCoalescing(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	for i := range 10 {
		s := runningStatus(false)
		s.ContainerStatuses[0].RestartCount = int32(i)
		e.w.SetPodStatus(pod, s)
	}
	acts := e.sync()
	if len(acts) != 1 {
		t.Fatalf("actions %v, want one patch for ten statuses", verbs(acts))
	}
	if got := e.get("web").Status.ContainerStatuses[0].RestartCount; got != 9 {
		t.Errorf("restart count %d, want the latest, 9", got)
	}
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("second sync made %v", verbs(acts))
	}
}

func TestNothingWrittenWhenUnchanged(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, runningStatus(true))
	if acts := e.sync(); len(acts) != 1 {
		t.Fatalf("actions %v", verbs(acts))
	}
	// The same status again, with fresher probe and transition times.
	s := runningStatus(true)
	for i := range s.Conditions {
		s.Conditions[i].LastProbeTime = metav1.Time{Time: t0.Add(time.Hour)}
		s.Conditions[i].LastTransitionTime = metav1.Time{Time: t0.Add(time.Hour)}
	}
	e.w.SetPodStatus(pod, s)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("unchanged status: %v", verbs(acts))
	}
	// A reconcile checks every pod without a request.
	e.clock.Step(status.DefaultReconcilePeriod)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("reconcile: %v", verbs(acts))
	}
	// A status the API already has (the writer restarted) is not written.
	e2 := newEnv(t, e.get("web"))
	e2.w.SetPodStatus(e.get("web"), runningStatus(true))
	if acts := e2.sync(); len(acts) != 0 {
		t.Errorf("status the API has: %v", verbs(acts))
	}
}

// Conditions others own stay; the node's keep their transition times.
func TestConditionsOfOthersKept(t *testing.T) {
	pod := apiPod("web", "uid-1")
	pod.Status.Conditions = []corev1.PodCondition{{Type: "example.com/gate", Status: corev1.ConditionTrue}}
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, runningStatus(false))
	e.sync()
	e.clock.Step(time.Minute)
	e.w.SetPodStatus(pod, runningStatus(true))
	e.sync()
	got := e.get("web").Status
	types := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range got.Conditions {
		types[c.Type] = c
	}
	if _, ok := types["example.com/gate"]; !ok {
		t.Errorf("readiness gate condition lost: %+v", got.Conditions)
	}
	if c := types[corev1.PodReady]; c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("Ready %+v, want True since t0+1m", c)
	}
	if c := types[corev1.PodScheduled]; !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("PodScheduled %+v, want its first transition time", c)
	}
}

func TestRetryWithBackoff(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	failures := 3
	e.client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	e.w.SetPodStatus(pod, runningStatus(false))
	if acts := e.syncErr(); len(acts) != 1 {
		t.Fatalf("first try %v", verbs(acts))
	}
	// Back-off: nothing until 500ms, 1s, 2s have passed.
	for _, wait := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		if e.wait != wait {
			t.Fatalf("SyncOnce returned wait %v, want %v", e.wait, wait)
		}
		e.w.SetPodStatus(pod, runningStatus(false)) // a new status does not skip the back-off
		if acts := e.sync(); len(acts) != 0 {
			t.Fatalf("retried before the back-off ended: %v", verbs(acts))
		}
		e.clock.Step(wait)
		e.client.ClearActions()
		before := failures
		var err error
		e.wait, err = e.w.SyncOnce(context.Background())
		if acts := e.client.Actions(); len(acts) != 1 {
			t.Fatalf("after %v: %v", wait, verbs(acts))
		}
		if (err != nil) != (failures < before) {
			t.Fatalf("after %v: error %v, failed %v", wait, err, failures < before)
		}
	}
	if e.get("web").Status.Phase != corev1.PodRunning {
		t.Error("status not written after the retries")
	}
	if got := requests(t, e.reg); got["patch"] != 4 {
		t.Errorf("requests %v, want 4 patches", got)
	}
}

func TestNoRegressionFromTerminal(t *testing.T) {
	t.Run("recorded", func(t *testing.T) {
		pod := apiPod("job", "uid-1")
		e := newEnv(t, pod)
		e.w.SetPodStatus(pod, runningStatus(true))
		e.w.SetPodStatus(pod, succeededStatus())
		e.w.SetPodStatus(pod, runningStatus(true))
		s, ok := e.w.Status("uid-1")
		if !ok || s.Phase != corev1.PodSucceeded {
			t.Fatalf("Status phase %q, want Succeeded kept", s.Phase)
		}
		e.sync()
		if got := e.get("job").Status.Phase; got != corev1.PodSucceeded {
			t.Errorf("API phase %q", got)
		}
	})
	t.Run("seen in the API", func(t *testing.T) {
		pod := apiPod("job", "uid-1")
		pod.Status = succeededStatus()
		pod.Status.Conditions[2] = cond(corev1.PodReady, false)
		e := newEnv(t, pod)
		e.w.SetPodStatus(pod, runningStatus(true))
		e.succeededKept("job", "uid-1")
	})
	t.Run("terminal means not ready", func(t *testing.T) {
		pod := apiPod("job", "uid-1")
		e := newEnv(t, pod)
		s := succeededStatus()
		s.Conditions[2] = cond(corev1.PodReady, true)
		s.Conditions[3] = cond(corev1.ContainersReady, true)
		e.w.SetPodStatus(pod, s)
		e.sync()
		for _, c := range e.get("job").Status.Conditions {
			if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && (c.Status != corev1.ConditionFalse || c.Reason != status.ReasonPodCompleted) {
				t.Errorf("%s %s %s, want False PodCompleted", c.Type, c.Status, c.Reason)
			}
		}
	})
}

func TestMirrorPodStatus(t *testing.T) {
	static, mirror := staticPod("etcd-node-a")
	e := newEnv(t)
	e.w.SetPodStatus(static, runningStatus(true))
	// No mirror pod yet: one read, no write, looked up again after back-off.
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"list"}) {
		t.Fatalf("without a mirror pod: %v", got)
	}
	if acts := e.sync(); len(acts) != 0 {
		t.Fatalf("looked up again before the back-off ended: %v", verbs(acts))
	}
	// A pod under that name that is not the mirror pod of this static pod
	// (an old hash) gets nothing.
	old := mirror.DeepCopy()
	old.Annotations[podsource.ConfigMirrorAnnotation] = "old-hash"
	if err := e.client.Tracker().Add(old); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(500 * time.Millisecond)
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"list"}) {
		t.Fatalf("with an old mirror pod: %v", got)
	}
	if err := e.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), mirror, "default"); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(time.Second)
	acts := e.sync()
	if got := verbs(acts); !reflect.DeepEqual(got, []string{"list", "patch/status"}) {
		t.Fatalf("with the mirror pod: %v", got)
	}
	if uid := patchOf(t, acts[1])["metadata"].(map[string]any)["uid"]; uid != "mirror-uid" {
		t.Errorf("patch precondition uid %v, want the mirror pod's", uid)
	}
	if got := e.get("etcd-node-a").Status; got.Phase != corev1.PodRunning || !got.ContainerStatuses[0].Ready {
		t.Errorf("mirror status %+v", got)
	}
	// The mirror pod's UID is known now: a change costs one patch.
	e.w.SetPodStatus(static, runningStatus(false))
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Errorf("second change: %v", got)
	}
	// A recreated mirror pod: the patch's precondition fails, the writer
	// reads the new one and writes to it.
	if err := e.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", "etcd-node-a"); err != nil {
		t.Fatal(err)
	}
	again := mirror.DeepCopy()
	again.UID = "mirror-uid-2"
	if err := e.client.Tracker().Add(again); err != nil {
		t.Fatal(err)
	}
	e.client.PrependReactor("patch", "pods", uidPrecondition(e))
	e.w.SetPodStatus(static, runningStatus(true))
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"patch/status", "list", "patch/status"}) {
		t.Errorf("recreated mirror pod: %v", got)
	}
	if got := e.get("etcd-node-a").Status; !got.ContainerStatuses[0].Ready {
		t.Errorf("new mirror status %+v", got)
	}
	// Static pods are never deleted, nor their mirror pods.
	e.w.PodTerminated(static)
	for _, a := range e.sync() {
		if a.GetVerb() == "delete" {
			t.Errorf("deleted a mirror pod")
		}
	}
	if s, _ := e.w.Status(static.UID); s.Phase != corev1.PodRunning {
		t.Errorf("static pod's phase %q made terminal", s.Phase)
	}
}

// uidPrecondition makes the fake API server refuse a patch whose uid is not
// the pod's as the real one does: 422, metadata.uid is immutable.
func uidPrecondition(e *env) clienttesting.ReactionFunc {
	return func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		cur, err := e.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), p.GetNamespace(), p.GetName())
		if err != nil {
			return false, nil, nil
		}
		want := fmt.Sprintf(`{"metadata":{"uid":%q}`, cur.(*corev1.Pod).UID)
		if !strings.HasPrefix(string(p.GetPatch()), want) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, p.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("metadata", "uid"), "other", "field is immutable"),
			})
		}
		return false, nil, nil
	}
}

// A pod recreated under the same name is never written.
func TestRecreatedPodNotWritten(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, runningStatus(false))
	e.sync()
	if err := e.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", "web"); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Tracker().Add(apiPod("web", "uid-2")); err != nil {
		t.Fatal(err)
	}
	e.client.PrependReactor("patch", "pods", uidPrecondition(e))
	e.w.SetPodStatus(pod, runningStatus(true))
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"patch/status", "list"}) {
		t.Fatalf("actions %v", got)
	}
	if got := e.get("web"); got.UID != "uid-2" || got.Status.Phase != corev1.PodPending {
		t.Errorf("new pod written: %+v", got.Status)
	}
	e.w.SetPodStatus(pod, runningStatus(false))
	e.clock.Step(time.Minute)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("writes after the pod was replaced: %v", verbs(acts))
	}
}

func TestFinalDelete(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, runningStatus(true))
	e.sync()

	// PodTerminated without a deletion: final status, no delete.
	t.Run("not deleted", func(t *testing.T) {
		job := apiPod("job", "uid-job")
		e := newEnv(t, job)
		e.w.SetPodStatus(job, succeededStatus())
		e.w.PodTerminated(job)
		for _, a := range e.sync() {
			if a.GetVerb() == "delete" {
				t.Error("deleted a pod whose deletion did not begin")
			}
		}
	})

	// Graceful deletion began; the containers still stop.
	deleting := deletingCopy(e.get("web"))
	if err := e.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), deleting, "default"); err != nil {
		t.Fatal(err)
	}
	e.w.SetPodStatus(deleting, runningStatus(false))
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Fatalf("while terminating: %v", got)
	}
	// Terminal status before PodTerminated: written, not deleted.
	e.w.SetPodStatus(deleting, succeededStatus())
	acts := e.sync()
	if got := verbs(acts); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Fatalf("terminal status: %v", got)
	}
	if md := patchOf(t, acts[0])["metadata"]; !reflect.DeepEqual(md, map[string]any{"uid": "uid-1"}) {
		t.Errorf("metadata %v: only the uid may be sent (deletionGracePeriodSeconds is immutable)", md)
	}
	// Terminated: the final delete, grace 0, UID precondition.
	e.w.PodTerminated(deleting)
	acts = e.sync()
	if got := verbs(acts); !reflect.DeepEqual(got, []string{"delete"}) {
		t.Fatalf("after PodTerminated: %v", got)
	}
	opts := acts[0].(clienttesting.DeleteAction).GetDeleteOptions()
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
		t.Errorf("grace %v, want 0", opts.GracePeriodSeconds)
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "uid-1" {
		t.Errorf("preconditions %+v, want uid-1", opts.Preconditions)
	}
	// Nothing more for it, even if told again.
	e.w.SetPodStatus(deleting, succeededStatus())
	e.clock.Step(time.Minute)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("after the delete: %v", verbs(acts))
	}
	e.w.RemovePod("uid-1")
	if _, ok := e.w.Status("uid-1"); ok {
		t.Error("status kept after RemovePod")
	}
}

// PodTerminated makes a status final when the caller's was not.
func TestPodTerminatedFinalStatus(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, runningStatus(true))
	deleting := deletingCopy(pod)
	e.w.PodTerminated(deleting)
	s, _ := e.w.Status("uid-1")
	if s.Phase != corev1.PodFailed {
		t.Errorf("phase %q, want Failed", s.Phase)
	}
	if term := s.ContainerStatuses[0].State.Terminated; term == nil || term.Reason != status.ReasonContainerStatusUnknown || term.ExitCode != 137 {
		t.Errorf("container state %+v, want ContainerStatusUnknown 137", s.ContainerStatuses[0].State)
	}
	// The API pod has no deletion timestamp in the fake, but the caller's
	// copy does: the writer deletes after writing the final status.
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"patch/status", "delete"}) {
		t.Errorf("actions %v", got)
	}
}

// One pod's lifecycle costs five requests: three status changes, the
// terminal status and the final delete.
func TestLifecycleRequestCount(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	var all []clienttesting.Action
	step := func(p *corev1.Pod, s corev1.PodStatus) {
		e.w.SetPodStatus(p, s)
		all = append(all, e.sync()...)
		e.clock.Step(time.Second)
	}
	step(pod, pendingStatus())
	step(pod, runningStatus(false))
	step(pod, runningStatus(true))
	deleting := deletingCopy(pod)
	step(deleting, runningStatus(true)) // deletion seen, nothing new to write
	step(deleting, succeededStatus())
	e.w.PodTerminated(deleting)
	all = append(all, e.sync()...)
	e.clock.Step(time.Minute)
	all = append(all, e.sync()...)
	want := []string{"patch/status", "patch/status", "patch/status", "patch/status", "delete"}
	if got := verbs(all); !reflect.DeepEqual(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	if got := requests(t, e.reg); got["patch"] != 4 || got["delete"] != 1 || got["get"]+got["list"] != 0 {
		t.Errorf("%s %v", status.MetricRequests, got)
	}
}

func TestStandalone(t *testing.T) {
	w, err := status.New(status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := apiPod("web", "uid-1")
	w.SetPodStatus(pod, runningStatus(true))
	if _, err := w.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, ok := w.Status("uid-1"); !ok || s.Phase != corev1.PodRunning {
		t.Errorf("Status %v %v", s.Phase, ok)
	}
	w.SetPodStatus(nil, corev1.PodStatus{})
	_, mirror := staticPod("m")
	w.SetPodStatus(mirror, runningStatus(true))
	if _, ok := w.Status(mirror.UID); ok {
		t.Error("a mirror pod's status was recorded")
	}
}

func TestRunWakesOnSetAndStops(t *testing.T) {
	defer leakcheck.Check(t)()
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.w.Run(ctx) }()
	e.w.SetPodStatus(pod, runningStatus(true))
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "status written by Run", func() bool {
		p, err := e.client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	// A failure is retried when the back-off timer fires.
	var patches atomic.Int32
	e.client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) == 1 {
			return true, nil, apierrors.NewServiceUnavailable("away")
		}
		return false, nil, nil
	})
	e.w.SetPodStatus(pod, runningStatus(false))
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the first patch failing", func() bool {
		return patches.Load() == 1 && e.clock.HasWaiters() // Run sleeps until the retry
	})
	e.clock.Step(time.Second) // past the retry's back-off
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "status written after the retry", func() bool {
		p, err := e.client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && !p.Status.ContainerStatuses[0].Ready
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// Writers sharing a Registerer (a fleet of simulated nodes) share the
// counters.
func TestSharedRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := status.New(status.Options{Registerer: reg}); err != nil {
			t.Fatalf("New: %v", err)
		}
	}
}

// gatedPods holds each PATCH at gate before passing it on (the fake
// clientset runs its reactors one at a time, so the gate sits in front).
func gatedPods(c corev1client.PodsGetter, gate func()) func(string) status.PodClient {
	return func(ns string) status.PodClient { return gatedPodInterface{c.Pods(ns), gate} }
}

type gatedPodInterface struct {
	status.PodClient
	gate func()
}

func (g gatedPodInterface) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	g.gate()
	return g.PodClient.Patch(ctx, name, pt, data, o, sub...)
}

// A burst of statuses is written MaxParallelWrites (4) pods at a time: the
// fourth PATCH starts while the first three are still waiting for the API
// server, and never more than four are in flight.
func TestParallelWrites(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 8 {
		pods = append(pods, apiPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("u%d", i))))
	}
	e := newEnv(t, pods...)
	var inFlight, most atomic.Int32
	release, entered := make(chan struct{}), make(chan struct{}, len(pods))
	gate := func() {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		entered <- struct{}{} // counted before the test can release anyone
		<-release
	}
	w, err := status.New(status.Options{Pods: gatedPods(e.client.CoreV1(), gate), Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		w.SetPodStatus(p, runningStatus(true))
	}
	done := make(chan error, 1)
	go func() { _, err := w.SyncOnce(context.Background()); done <- err }()
	for i := range 4 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d writes started while the first ones wait", i)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != 4 {
		t.Errorf("%d writes in flight at most, want 4", m)
	}
	for _, p := range pods {
		if got := e.get(p.Name); got.Status.Phase != corev1.PodRunning {
			t.Errorf("%s: phase %q after the burst", p.Name, got.Status.Phase)
		}
	}
}

// A static pod's status waiting for its mirror pod is written as soon as
// SetMirrorPod hands the mirror pod in: no read, no wait for the back-off.
func TestSetMirrorPod(t *testing.T) {
	static, mirror := staticPod("etcd-node-a")
	e := newEnv(t)
	e.w.SetPodStatus(static, runningStatus(true))
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"list"}) {
		t.Fatalf("without a mirror pod: %v", got)
	}
	// Ignored: not a mirror pod, another name, another hash.
	other := mirror.DeepCopy()
	other.Annotations[podsource.ConfigMirrorAnnotation] = "old-hash"
	renamed := mirror.DeepCopy()
	renamed.Name = "etcd-node-b"
	e.w.SetMirrorPod(static)
	e.w.SetMirrorPod(other)
	e.w.SetMirrorPod(renamed)
	e.w.SetMirrorPod(nil)
	if acts := e.sync(); len(acts) != 0 {
		t.Fatalf("wrote for a pod that is not its mirror pod: %v", verbs(acts))
	}
	created, err := e.client.CoreV1().Pods("default").Create(context.Background(), mirror, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.w.SetMirrorPod(created)
	acts := e.sync() // the clock has not moved: the back-off is skipped
	if got := verbs(acts); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Fatalf("after SetMirrorPod: %v", got)
	}
	if uid := patchOf(t, acts[0])["metadata"].(map[string]any)["uid"]; uid != "mirror-uid" {
		t.Errorf("patch precondition uid %v, want the mirror pod's", uid)
	}
	if got := e.get("etcd-node-a").Status; got.Phase != corev1.PodRunning {
		t.Errorf("mirror status %+v", got)
	}
	// An older copy of the same mirror pod changes nothing.
	e.w.SetMirrorPod(created)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("an old copy caused writes: %v", verbs(acts))
	}
}

// A mirror pod handed in while a sync is looking for it (and finds none)
// is written to at once, not after the back-off.
func TestSetMirrorPodDuringRead(t *testing.T) {
	static, mirror := staticPod("etcd-node-a")
	e := newEnv(t)
	var once atomic.Bool
	e.client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if once.CompareAndSwap(false, true) {
			e.w.SetMirrorPod(mirror) // the answer below still has no mirror pod
			return true, &corev1.PodList{}, nil
		}
		return false, nil, nil
	})
	if err := e.client.Tracker().Add(mirror); err != nil {
		t.Fatal(err)
	}
	e.w.SetPodStatus(static, runningStatus(true))
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"list"}) {
		t.Fatalf("first sync: %v", got)
	}
	if e.wait != 0 {
		t.Errorf("next sync in %v, want at once", e.wait)
	}
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Fatalf("second sync: %v", got)
	}
}

// withPendingDelay replaces e's writer with one whose PendingDelay is d.
func withPendingDelay(t *testing.T, e *env, d time.Duration) {
	t.Helper()
	w, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return e.client.CoreV1().Pods(ns) }, Clock: e.clock, PendingDelay: d})
	if err != nil {
		t.Fatal(err)
	}
	e.w = w
}

// With PendingDelay a change that leaves the pod Pending waits; one out of
// Pending is written at once and carries what waited, in one patch.
func TestPendingDelay(t *testing.T) {
	pod := apiPod("web", "uid-1")
	e := newEnv(t, pod)
	withPendingDelay(t, e, 300*time.Millisecond)

	e.w.SetPodStatus(pod, pendingStatus())
	if acts := e.sync(); len(acts) != 0 {
		t.Fatalf("a Pending status was written before the delay: %v", verbs(acts))
	}
	if e.wait != 300*time.Millisecond {
		t.Errorf("next sync in %v, want the delay", e.wait)
	}
	e.w.SetPodStatus(pod, runningStatus(true))
	acts := e.sync()
	if got := verbs(acts); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Fatalf("Running: %v, want one patch at once", got)
	}
	if got := e.get("web").Status; got.Phase != corev1.PodRunning || len(got.Conditions) != 5 || got.StartTime == nil {
		t.Errorf("status after the one patch %+v", got)
	}
	e.clock.Step(time.Second)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("the delay's end wrote again: %v", verbs(acts))
	}

	// A pod that stays Pending past the delay is written when it ends.
	slow := apiPod("slow", "uid-2")
	if err := e.client.Tracker().Add(slow); err != nil {
		t.Fatal(err)
	}
	e.w.SetPodStatus(slow, pendingStatus())
	if acts := e.sync(); len(acts) != 0 {
		t.Fatalf("written before the delay: %v", verbs(acts))
	}
	e.clock.Step(299 * time.Millisecond)
	if acts := e.sync(); len(acts) != 0 {
		t.Fatalf("written before the delay ended: %v", verbs(acts))
	}
	e.clock.Step(time.Millisecond)
	if got := verbs(e.sync()); !reflect.DeepEqual(got, []string{"patch/status"}) {
		t.Fatalf("after the delay: %v", got)
	}
	if got := e.get("slow").Status; len(got.ContainerStatuses) == 0 {
		t.Errorf("pending status not written: %+v", got)
	}
	// A deletion does not wait.
	e.w.SetPodStatus(deletingCopy(e.get("slow")), pendingStatus())
	e.w.PodTerminated(slow)
	if got := verbs(e.sync()); len(got) == 0 {
		t.Errorf("termination of a deleted pod waited")
	}
}

func TestPendingDelayBounds(t *testing.T) {
	for _, d := range []time.Duration{-time.Millisecond, 11 * time.Second} {
		if _, err := status.New(status.Options{PendingDelay: d}); err == nil || !strings.Contains(err.Error(), "Options.PendingDelay") {
			t.Errorf("PendingDelay %v: error %v, want one naming the field", d, err)
		}
	}
}
