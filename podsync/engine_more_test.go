package podsync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// newProbes is a probe manager on h's clock whose exec probes run in h's
// runtime, with no start jitter.
func newProbes(t *testing.T, h *harness) *probe.Manager {
	t.Helper()
	prober, err := probe.NewHandlers(probe.HandlerOptions{Execer: h.RT})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := probe.New(probe.Options{Prober: prober, Clock: h.Clock, NoStartJitter: true})
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

func TestEngineLivenessFailureRestarts(t *testing.T) {
	h := newHarness(t)
	pm := newProbes(t, h)
	dir := t.TempDir()
	h.Syncer, _ = cri.New(cri.Options{Runtime: h.RT, Clock: h.Clock, PodLogRoot: dir, PodRoot: dir, ResolvConf: "-", Probes: pm})
	h.Eng, _ = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, Probes: pm})
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 1}
	h.Add(pod)
	first := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(first) != 1 {
		t.Fatalf("running %v", first)
	}
	h.RT.ScriptExec(first[0].Id, []string{"check"}, runtimetest.ExecScript{ExitCode: 1})
	for range 3 {
		h.Clock.Step(10 * time.Second)
		if _, err := pm.SyncOnce(h.Ctx); err != nil {
			t.Fatal(err)
		}
	}
	if u, ok := pm.Latest(pod.UID, "a", probe.Liveness); !ok || u.Result != probe.Failure {
		t.Fatalf("liveness %+v %v", u, ok)
	}
	h.Eng.Trigger(pod.UID)
	h.Steps(3)
	now := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(now) != 1 || now[0].Id == first[0].Id {
		t.Fatalf("not restarted: %v", now)
	}
	if rc := h.Writer.Last(pod.UID).ContainerStatuses[0].RestartCount; rc != 1 {
		t.Errorf("restartCount %d", rc)
	}
}

func TestEngineImagePull(t *testing.T) {
	h := newHarness(t)
	never := busyboxPod(corev1.RestartPolicyAlways, "a")
	never.Spec.Containers[0].Image, never.Spec.Containers[0].ImagePullPolicy = "example.com/missing:1", corev1.PullNever
	h.Add(never)
	if w := h.Writer.Last(never.UID).ContainerStatuses[0].State.Waiting; w == nil || w.Reason != podsync.ReasonErrImageNeverPull {
		t.Errorf("PullNever of a missing image: %+v", w)
	}

	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.UID, pod.Name = "uid-2", "pull"
	pod.Spec.Containers[0].Image = "example.com/app:2"
	fail := runtimetest.Errors(errors.New("registry unavailable"))
	h.RT.SetHooks(runtimetest.Hooks{PullImage: func(context.Context, *runtimeapi.ImageSpec, *runtimeapi.AuthConfig, *runtimeapi.PodSandboxConfig) error {
		return fail()
	}})
	h.Add(pod)
	if !h.Writer.SawWaiting(pod.UID, podsync.ReasonErrImagePull) {
		t.Error("no ErrImagePull status")
	}
	next, _ := h.Eng.SyncOnce(h.Ctx)
	if d := next; d <= 0 || d > 10*time.Second {
		t.Errorf("next step in %v", d)
	}
	h.Clock.Step(5 * time.Second)
	h.Eng.Trigger(pod.UID)
	h.Steps(1)
	// The back-off says why the last pull failed: the runtime's message
	// alone, as the kubelet shows it.
	if w := h.Writer.Last(pod.UID).ContainerStatuses[0].State.Waiting; w == nil || w.Reason != podsync.ReasonImagePullBackOff ||
		w.Message != `Back-off pulling image "example.com/app:2": ErrImagePull: registry unavailable` {
		t.Fatalf("during back-off: %+v", w)
	}
	h.Clock.Step(5 * time.Second)
	h.Steps(2)
	if s := h.Writer.Last(pod.UID); s.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("after back-off: %+v", s.ContainerStatuses[0])
	}
}

// An image already there (pulled by no one, or before): a Pulled event in
// the kubelet's words, for each container started.
func TestEnginePulledEventForPresentImage(t *testing.T) {
	h := newHarness(t)
	rec := record.NewFakeRecorder(100)
	dir := t.TempDir()
	var err error
	if h.Syncer, err = cri.New(cri.Options{Runtime: h.RT, Clock: h.Clock, PodLogRoot: dir, PodRoot: dir, ResolvConf: "-", Recorder: rec}); err != nil {
		t.Fatal(err)
	}
	if h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock}); err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	want := fmt.Sprintf("Normal Pulled Container image %q already present on machine and can be accessed by the pod", pod.Spec.Containers[0].Image)
	for {
		select {
		case e := <-rec.Events:
			if e == want {
				return
			}
		default:
			t.Fatalf("no event %q", want)
		}
	}
}

func TestEngineEventsAndMetrics(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(100)
	dir := t.TempDir()
	var err error
	if h.Syncer, err = cri.New(cri.Options{Runtime: h.RT, Clock: h.Clock, PodLogRoot: dir, PodRoot: dir, ResolvConf: "-", Recorder: rec, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	// A second engine on the same registerer shares the metrics.
	if _, err := podsync.New(podsync.Options{Syncer: h.Syncer, Clock: h.Clock, Registerer: reg}); err != nil {
		t.Fatalf("second registration: %v", err)
	}
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	h.Add(pod)
	fail := runtimetest.Errors(errors.New("no network"))
	h.RT.SetHooks(runtimetest.Hooks{RunPodSandbox: func(context.Context, *runtimeapi.PodSandboxConfig, string) error { return fail() }})
	other := busyboxPod(corev1.RestartPolicyAlways, "b")
	other.UID, other.Name = "uid-2", "other"
	h.Add(other)
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{other}})
	h.Steps(3)

	var events []string
	for len(rec.Events) > 0 {
		events = append(events, strings.Join(strings.Fields(<-rec.Events)[:2], " "))
	}
	for _, want := range []string{"Normal Pulling", "Normal Pulled", "Normal Created", "Normal Started", "Warning FailedCreatePodSandBox"} {
		found := false
		for _, e := range events {
			found = found || e == want
		}
		if !found {
			t.Errorf("no %q event in %v", want, events)
		}
	}
	m := testenv.Metrics(t, reg)
	if m["kubelet_pod_worker_duration_seconds"] == 0 || m["kubelet_pod_start_duration_seconds"] != 1 || m["kubelet_runtime_operations_errors_total"] != 1 {
		t.Errorf("metrics %v", m)
	}
	if n := testutil.ToFloat64(podsync.RunningPods(h.Eng)); n != 1 {
		t.Errorf("kubelet_running_pods %v", n)
	}
	if n := testutil.ToFloat64(podsync.RunningContainers(h.Eng).WithLabelValues("running")); n != 1 {
		t.Errorf("running containers %v", n)
	}
}

// TestEngineManyPods syncs many pods in parallel (bounded by MaxParallel)
// and removes them, for the race detector.
func TestEngineManyPods(t *testing.T) {
	h := newHarness(t)
	var err error
	if h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, MaxParallel: 4}); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range 20 {
		p := busyboxPod(corev1.RestartPolicyAlways, "a", "b")
		p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		pods = append(pods, p)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: pods})
	h.Steps(3)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 40 {
		t.Fatalf("%d running, want 40", n)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: pods})
	h.Steps(4)
	if all, _ := h.RT.ListContainers(h.Ctx, nil); len(all) != 0 {
		t.Fatalf("%d containers left", len(all))
	}
}

// A relist that sees a pod's containers start publishes the pod's status at
// once, before (and without) a sync of the pod: a pod that started is
// reported Running even while every sync slot is taken.
func TestEngineRelistPublishesStatus(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.Steps(1) // relist, then the first sync: Pending published, containers started
	if s := h.Writer.Last(pod.UID); s.Phase != corev1.PodPending {
		t.Fatalf("after the first sync: %+v", s)
	}
	if err := podsync.Relist(h.Ctx, h.Eng); err != nil {
		t.Fatal(err)
	}
	s := h.Writer.Last(pod.UID)
	if s.Phase != corev1.PodRunning || len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("after the relist: %+v", s)
	}
	n := len(h.Writer.Statuses[pod.UID])
	h.Steps(1) // the pod's sync: the same status, not handed over again
	if got := len(h.Writer.Statuses[pod.UID]); got != n {
		t.Errorf("%d statuses after the sync, want %d", got, n)
	}
}

// blockingSyncer holds SyncPod of one pod until release is closed.
type blockingSyncer struct {
	*cri.Syncer
	uid     types.UID
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSyncer) SyncPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState) (podsync.SyncResult, error) {
	if pod.UID == b.uid {
		close(b.entered)
		<-b.release
	}
	return b.Syncer.SyncPod(ctx, pod, observed)
}

// oneSlotHarness is an engine with MaxParallel 1 whose syncer holds pod b's
// SyncPod until bs.release is closed, running pod a (with restartPolicy
// policy); b is not added yet.
func oneSlotHarness(t *testing.T, policy corev1.RestartPolicy) (h *harness, a, b *corev1.Pod, bs *blockingSyncer) {
	t.Helper()
	h = newHarness(t)
	a = busyboxPod(policy, "a")
	a.UID, a.Name = "uid-a", "a"
	b = busyboxPod(corev1.RestartPolicyAlways, "b")
	b.UID, b.Name = "uid-b", "b"
	bs = &blockingSyncer{Syncer: h.Syncer, uid: b.UID, entered: make(chan struct{}), release: make(chan struct{})}
	var err error
	h.Eng, err = podsync.New(podsync.Options{Syncer: bs, Relister: h.Syncer, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"}, MaxParallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.Add(a)
	if s := h.Writer.Last(a.UID); s.Phase != corev1.PodRunning {
		t.Fatalf("a: %+v", s)
	}
	return h, a, b, bs
}

// While a pod's sync waits for a slot, a relist publishes the pod's new
// status, and the sync, once it has its slot, works from that observation
// rather than the one it was queued with.
func TestEngineQueuedSyncSeesNewestState(t *testing.T) {
	h, a, b, bs := oneSlotHarness(t, corev1.RestartPolicyNever)
	id := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)[0].Id

	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{b}})
	done := make(chan error, 1)
	go func() { _, err := h.Eng.SyncOnce(h.Ctx); done <- err }()
	<-bs.entered // b holds the only slot
	h.Eng.Trigger(a.UID)
	go func() { _, err := h.Eng.SyncOnce(h.Ctx); done <- err }() // a's sync queues for the slot
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "a's sync queued", func() bool {
		return podsync.SyncQueued(h.Eng, a.UID)
	})
	if err := h.RT.Exit(id, 0); err != nil {
		t.Fatal(err)
	}
	if err := podsync.Relist(h.Ctx, h.Eng); err != nil {
		t.Fatal(err)
	}
	if s := h.Writer.Last(a.UID); s.Phase != corev1.PodSucceeded {
		t.Errorf("a after the relist, its sync still queued: %+v", s)
	}
	close(bs.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if s := h.Writer.Last(a.UID); s.Phase != corev1.PodSucceeded {
		t.Errorf("a after its sync: %+v", s)
	}
}

// A pod being stopped takes no slot of MaxParallel: while another pod's
// sync holds the only slot, a deleted pod's containers and sandbox are
// stopped.
func TestEngineStopsWithoutSlot(t *testing.T) {
	h, a, b, bs := oneSlotHarness(t, corev1.RestartPolicyAlways)

	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{b}})
	done := make(chan error, 2)
	go func() { _, err := h.Eng.SyncOnce(h.Ctx); done <- err }()
	<-bs.entered // b holds the only slot
	del := a.DeepCopy()
	now := metav1.NewTime(h.Clock.Now())
	zero := int64(0)
	del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &now, &zero
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: []*corev1.Pod{del}})
	go func() { _, err := h.Eng.SyncOnce(h.Ctx); done <- err }()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "a's sandbox stopped (or removed) while b holds the slot", func() bool {
		sbs, err := h.RT.ListPodSandbox(h.Ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(a.UID)}})
		if err != nil {
			return false
		}
		for _, sb := range sbs {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return false
			}
		}
		return true
	})
	close(bs.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// failingCleaner fails CleanupPod the first n times.
type failingCleaner struct {
	*cri.Syncer
	n     int
	calls int
}

func (f *failingCleaner) CleanupPod(ctx context.Context, pod *corev1.Pod) error {
	f.calls++
	if f.calls <= f.n {
		return errors.New("directory not empty")
	}
	return f.Syncer.CleanupPod(ctx, pod)
}

// A removed pod whose clean-up fails (a log rotation writing into its log
// directory meanwhile) is cleaned up again ErrorBackoff later, not left.
func TestCleanupRetriedAfterFailure(t *testing.T) {
	h := newHarness(t)
	fc := &failingCleaner{Syncer: h.Syncer, n: 1}
	var err error
	h.Eng, err = podsync.New(podsync.Options{Syncer: fc, Relister: h.Syncer, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	dir := podsync.PodLogDir(h.LogRoot, pod)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("log directory: %v", err)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	h.Steps(2)
	if fc.calls != 1 {
		t.Fatalf("CleanupPod called %d times, want 1 (failed)", fc.calls)
	}
	if wait, err := h.Eng.SyncOnce(h.Ctx); err != nil || wait > 10*time.Second {
		t.Fatalf("next step in %v (%v), want within the 10s error back-off", wait, err)
	}
	h.Steps(1) // not due yet
	if fc.calls != 1 {
		t.Fatalf("CleanupPod retried before the back-off: %d calls", fc.calls)
	}
	h.Clock.Step(10 * time.Second)
	h.Steps(1)
	if fc.calls != 2 {
		t.Fatalf("CleanupPod called %d times after the back-off, want 2", fc.calls)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("log directory after the retry: %v, want it gone", err)
	}
	h.Steps(1)
	if fc.calls != 2 {
		t.Errorf("CleanupPod called again after it succeeded: %d calls", fc.calls)
	}
}

// A finished pod's status shows what stopped (its sandbox not ready) as
// soon as its containers and sandbox are stopped, before and whatever the
// clean-up after it: here the removal of the sandbox keeps failing.
func TestEngineFinishedPodStatusBeforeCleanup(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyNever, "a")
	h.Add(pod)
	h.RT.SetHooks(runtimetest.Hooks{RemovePodSandbox: func(context.Context, string) error { return errors.New("busy") }})
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		if err := h.RT.Exit(c.Id, 0); err != nil {
			t.Fatal(err)
		}
	}
	h.Eng.RelistNow()
	h.Steps(6)
	s := h.Writer.Last(pod.UID)
	if s.Phase != corev1.PodSucceeded || cond(s, corev1.PodReadyToStartContainers) != "False/PodSandboxNotReady" {
		t.Errorf("phase %s, PodReadyToStartContainers %s: want Succeeded, False/PodSandboxNotReady", s.Phase, cond(s, corev1.PodReadyToStartContainers))
	}
}

// While every slot is held by a slow sync (a node starting many pods), a
// running pod whose readiness probe succeeds is written Ready at once, not
// after the slow sync, and its own sync still runs once the slot is free.
func TestEngineReadyWhileSlotsHeld(t *testing.T) {
	h := newHarness(t)
	pm := newProbes(t, h)
	a := busyboxPod(corev1.RestartPolicyAlways, "a")
	a.UID, a.Name = "uid-a", "a"
	a.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	b := busyboxPod(corev1.RestartPolicyAlways, "b")
	b.UID, b.Name = "uid-b", "b"
	bs := &blockingSyncer{Syncer: h.Syncer, uid: b.UID, entered: make(chan struct{}), release: make(chan struct{})}
	var err error
	if h.Eng, err = podsync.New(podsync.Options{Syncer: bs, Relister: h.Syncer, Writer: h.Writer, Clock: h.Clock,
		HostIPs: []string{"192.0.2.1"}, MaxParallel: 1, Probes: pm}); err != nil {
		t.Fatal(err)
	}
	h.Add(a)
	if s := h.Writer.Last(a.UID); s.Phase != corev1.PodRunning || cond(s, corev1.PodReady) != "False/ContainersNotReady" {
		t.Fatalf("a before its probe: %s %s", s.Phase, cond(s, corev1.PodReady))
	}

	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{b}})
	done := make(chan error, 2)
	go func() { _, err := h.Eng.SyncOnce(h.Ctx); done <- err }()
	<-bs.entered // b holds the only slot
	id := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)[0].Id
	h.RT.ScriptExec(id, []string{"check"}, runtimetest.ExecScript{})
	if _, err := pm.SyncOnce(h.Ctx); err != nil {
		t.Fatal(err)
	}
	if u, ok := pm.Latest(a.UID, "a", probe.Readiness); !ok || u.Result != probe.Success {
		t.Fatalf("readiness %+v %v", u, ok)
	}
	h.Eng.Trigger(a.UID)
	go func() { _, err := h.Eng.SyncOnce(h.Ctx); done <- err }() // a's sync queues for the slot
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "a written Ready while b holds the slot", func() bool {
		return cond(h.Writer.Last(a.UID), corev1.PodReady) == "True/"
	})
	if !podsync.SyncQueued(h.Eng, a.UID) {
		t.Error("a's sync is not waiting for the slot")
	}
	close(bs.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if s := h.Writer.Last(a.UID); cond(s, corev1.PodReady) != "True/" {
		t.Errorf("a after its sync: %s", cond(s, corev1.PodReady))
	}
}

// A source that has a pod while the engine stops what an earlier agent ran
// of it (an orphan: the new agent's sources had not sent it yet) gets the
// pod started afresh once that is stopped, not dropped with the orphan.
func TestEngineOrphanAddedWhileStopping(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	old := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(old) != 1 {
		t.Fatalf("%d running containers, want 1", len(old))
	}

	// A restarted agent without sources: the pod is an orphan, whose stop
	// fails once, so that the pod comes while it is being stopped.
	h.NewEngine()
	h.RT.SetHooks(runtimetest.Hooks{StopContainer: func(context.Context, string, time.Duration) error { return errors.New("stuck") }})
	h.Steps(1)
	if l, ok := h.Eng.PodLifecycle(pod.UID); !ok || l != podsync.Terminating {
		t.Fatalf("orphan: lifecycle %v %v, want Terminating", l, ok)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.RT.SetHooks(runtimetest.Hooks{})
	h.Clock.Step(10 * time.Second) // the error back-off
	h.Steps(4)

	if l, ok := h.Eng.PodLifecycle(pod.UID); !ok || l != podsync.Syncing {
		t.Fatalf("after the orphan stopped: lifecycle %v %v, want Syncing", l, ok)
	}
	s := h.Writer.Last(pod.UID)
	if s.Phase != corev1.PodRunning || len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Running == nil ||
		s.ContainerStatuses[0].ContainerID == "containerd://"+old[0].Id {
		t.Fatalf("status %s %+v; want Running in a new container", s.Phase, s.ContainerStatuses)
	}
	if _, err := h.RT.ContainerStatus(h.Ctx, old[0].Id, false); err == nil {
		t.Errorf("the orphan's container %s is still there", old[0].Id)
	}
}

// A pod its source removes and sends again (a static pod's file taken away
// and put back: the same UID) while it is being stopped runs again once it
// is stopped, and keeps its log directory: the clean-up of the removed pod
// is the new pod's to skip.
func TestEngineRemovedPodAddedAgainWhileStopping(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	h.RT.SetHooks(runtimetest.Hooks{StopContainer: func(context.Context, string, time.Duration) error { return errors.New("stuck") }})
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	h.Steps(1)
	if l, ok := h.Eng.PodLifecycle(pod.UID); !ok || l != podsync.Terminating {
		t.Fatalf("removed: lifecycle %v %v, want Terminating", l, ok)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.RT.SetHooks(runtimetest.Hooks{})
	h.Clock.Step(10 * time.Second)
	h.Steps(4)

	if l, ok := h.Eng.PodLifecycle(pod.UID); !ok || l != podsync.Syncing {
		t.Fatalf("after the stop: lifecycle %v %v, want Syncing", l, ok)
	}
	if s := h.Writer.Last(pod.UID); s.Phase != corev1.PodRunning || len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("status %s %+v; want Running", s.Phase, s.ContainerStatuses)
	}
	if _, err := os.Stat(podsync.PodLogDir(h.LogRoot, pod)); err != nil {
		t.Errorf("the pod's log directory: %v; want it kept for the pod running again", err)
	}
}
