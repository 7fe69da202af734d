package cri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func TestEngineRunsPod(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a", "b")
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.Steps(3)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 2 {
		t.Fatalf("%d running containers, want 2", n)
	}
	s := h.Writer.Last(pod.UID)
	if s.Phase != corev1.PodRunning || cond(s, corev1.PodReady) != "True/" || s.PodIP != "192.0.2.1" {
		t.Fatalf("status %+v", s)
	}
	cs := s.ContainerStatuses[0]
	if cs.ContainerID == "" || cs.ImageID == "" || cs.State.Running == nil {
		t.Errorf("container status %+v", cs)
	}
	// Nothing more to do: a further step makes no runtime call but lists.
	h.RT.ResetCalls()
	h.Steps(1)
	for _, c := range h.RT.Calls() {
		if c.Method != "ListPodSandbox" && c.Method != "ListContainers" && c.Method != "Status" {
			t.Errorf("unexpected call %s", c.Method)
		}
	}
}

func TestEngineCrashLoop(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	waits := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second}
	for i, wait := range waits {
		running := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
		if len(running) != 1 {
			t.Fatalf("round %d: %d running", i, len(running))
		}
		if err := h.RT.Exit(running[0].Id, 1); err != nil {
			t.Fatal(err)
		}
		h.Steps(2)
		if wait > 0 {
			if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 0 {
				t.Fatalf("round %d: restarted during back-off", i)
			}
			s := h.Writer.Last(pod.UID)
			if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != podsync.ReasonCrashLoopBackOff {
				t.Fatalf("round %d: status %+v", i, s.ContainerStatuses[0])
			}
			next, _ := h.Eng.SyncOnce(h.Ctx)
			if d := next; d <= 0 || d > wait {
				t.Fatalf("round %d: next step in %v, want within %v", i, d, wait)
			}
			h.Clock.Step(wait)
			h.Steps(2)
		}
		s := h.Writer.Last(pod.UID)
		if got := s.ContainerStatuses[0].RestartCount; got != int32(i+1) {
			t.Fatalf("round %d: restartCount %d, status %+v", i, got, s.ContainerStatuses[0])
		}
		if lt := s.ContainerStatuses[0].LastTerminationState.Terminated; lt == nil || lt.ExitCode != 1 {
			t.Fatalf("round %d: last state %+v", i, s.ContainerStatuses[0].LastTerminationState)
		}
	}
	// Old instances are removed: at most two per container.
	if all, _ := h.RT.ListContainers(h.Ctx, nil); len(all) > 2 {
		t.Errorf("%d containers kept", len(all))
	}
}

func TestEngineInitContainersAndNever(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyNever, "a")
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: runtimetest.BusyboxImage}}
	h.Add(pod)
	running := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(running) != 1 || running[0].Metadata.Name != "init" {
		t.Fatalf("running %v, want init alone", running)
	}
	if s := h.Writer.Last(pod.UID); s.Phase != corev1.PodPending || s.ContainerStatuses[0].State.Waiting.Reason != podsync.ReasonPodInitializing {
		t.Fatalf("status %+v", s)
	}
	_ = h.RT.Exit(running[0].Id, 0)
	h.Steps(2)
	running = h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(running) != 1 || running[0].Metadata.Name != "a" {
		t.Fatalf("running %v, want a", running)
	}
	_ = h.RT.Exit(running[0].Id, 3)
	h.Steps(6)
	s := h.Writer.Last(pod.UID)
	if s.Phase != corev1.PodFailed || s.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Fatalf("status %+v", s)
	}
	if l, _ := h.Eng.PodLifecycle(pod.UID); l != podsync.Done {
		t.Fatalf("lifecycle %s", l)
	}
	if sbs, _ := h.RT.ListPodSandbox(h.Ctx, nil); len(sbs) != 0 {
		t.Errorf("sandboxes left: %v", sbs)
	}
	if len(h.Writer.Terminated) != 1 {
		t.Errorf("PodTerminated calls %v", h.Writer.Terminated)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	if _, ok := h.Eng.PodLifecycle(pod.UID); ok || len(h.Writer.Removed) != 1 {
		t.Errorf("worker kept after REMOVE")
	}
}

func TestEngineImageChangeRecreates(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a", "b")
	h.Add(pod)
	before := map[string]string{}
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		before[c.Metadata.Name] = c.Id
	}
	h.RT.AddImage("docker.io/library/busybox:1.37", 100)
	upd := pod.DeepCopy()
	upd.Spec.Containers[1].Image = "docker.io/library/busybox:1.37"
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{upd}})
	h.Steps(2)
	after := map[string]string{}
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		after[c.Metadata.Name] = c.Id
	}
	if after["a"] != before["a"] || after["b"] == before["b"] || after["b"] == "" {
		t.Fatalf("before %v after %v: want b alone recreated", before, after)
	}
}

func TestEngineDeleteAndOrphans(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo bye"}}}}
	h.Add(pod)
	// An orphan: a labelled sandbox no source knows; and an unlabelled one.
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "old", Namespace: "default", Uid: "uid-old"},
		Labels: map[string]string{LabelPodUID: "uid-old", LabelPodName: "old", LabelPodNamespace: "default"}}
	if _, err := h.RT.RunPodSandbox(h.Ctx, cfg, ""); err != nil {
		t.Fatal(err)
	}
	foreign, _ := h.RT.RunPodSandbox(h.Ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "x", Namespace: "y", Uid: "z"}}, "")
	del := pod.DeepCopy()
	now := metav1.NewTime(h.Clock.Now())
	grace := int64(5)
	del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &now, &grace
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: []*corev1.Pod{del}})
	h.Steps(4)
	sbs, _ := h.RT.ListPodSandbox(h.Ctx, nil)
	if len(sbs) != 1 || sbs[0].Id != foreign {
		t.Fatalf("sandboxes %v, want the foreign one alone", sbs)
	}
	var execs, stops int
	for _, c := range h.RT.Calls() {
		switch c.Method {
		case "ExecSync":
			execs++
		case "StopContainer":
			stops++
		}
	}
	if execs != 1 || stops == 0 {
		t.Errorf("preStop execs %d stops %d", execs, stops)
	}
	if s := h.Writer.Last(pod.UID); s.Phase != corev1.PodFailed && s.Phase != corev1.PodSucceeded {
		t.Errorf("final phase %s", s.Phase)
	}
}

func TestEngineAdoption(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	r := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	_ = h.RT.Exit(r[0].Id, 1)
	h.Steps(2) // restarted once: restartCount 1
	before := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	h.NewEngine()
	h.RT.ResetCalls()
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.Steps(3)
	after := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(after) != 1 || after[0].Id != before[0].Id {
		t.Fatalf("not adopted: before %v after %v", before, after)
	}
	for _, c := range h.RT.Calls() {
		switch c.Method {
		case "RunPodSandbox", "CreateContainer", "StopContainer", "StopPodSandbox":
			t.Errorf("new engine called %s", c.Method)
		}
	}
	if rc := h.Writer.Last(pod.UID).ContainerStatuses[0].RestartCount; rc != 1 {
		t.Errorf("restartCount %d after adoption", rc)
	}
}

func TestEngineRun(t *testing.T) {
	defer leakcheck.Check(t)() // the containerd harness runs beside the tests
	h := newHarness(t)
	updates := make(chan podsource.Update, 1)
	var err error
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, Updates: updates, HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.Eng.Run(ctx) }()
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	updates <- podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "pod Running", func() bool {
		h.Clock.Step(100 * time.Millisecond)
		return h.Writer.Last(pod.UID).Phase == corev1.PodRunning
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	s := podsync.SyncerFuncs{}
	if _, err := podsync.New(podsync.Options{Syncer: s}); err == nil {
		t.Error("no Relister accepted")
	}
	rl := relisterFunc(func(context.Context) (map[types.UID]*podsync.PodState, error) { return nil, nil })
	if _, err := podsync.New(podsync.Options{Syncer: s, Relister: rl, RelistPeriod: 10}); err == nil {
		t.Error("RelistPeriod 10ns accepted")
	}
	if _, err := podsync.New(podsync.Options{Syncer: s, Relister: rl, MaxParallel: -1}); err == nil {
		t.Error("MaxParallel -1 accepted")
	}
	if _, err := New(Options{Runtime: runtimetest.New(runtimetest.Options{}), CrashLoopInitial: time.Hour}); err == nil {
		t.Error("CrashLoopInitial above Max accepted")
	}
}

// A removed pod is stopped and cleaned up in one sync: the engine reads the
// pod alone after SyncTerminatingPod instead of waiting for a relist.
func TestRemovedPodCleanedInOneSync(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a", "b")
	h.Add(pod)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 2 {
		t.Fatalf("%d running", n)
	}
	h.RT.ResetCalls()
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	h.Steps(1)
	if sbs, _ := h.RT.ListPodSandbox(h.Ctx, nil); len(sbs) != 0 {
		t.Fatalf("%d sandboxes left after one step", len(sbs))
	}
	if cs, _ := h.RT.ListContainers(h.Ctx, nil); len(cs) != 0 {
		t.Fatalf("%d containers left after one step", len(cs))
	}
	if _, ok := h.Eng.PodLifecycle(pod.UID); ok {
		t.Error("the removed pod's worker is still there")
	}
	var calls []string
	for _, c := range h.RT.Calls() {
		if strings.HasPrefix(c.Method, "Remove") || strings.HasPrefix(c.Method, "Stop") {
			calls = append(calls, c.Method)
		}
	}
	// Two containers stopped, the sandbox stopped, then removed with its containers.
	if want := "StopContainer StopContainer StopPodSandbox RemovePodSandbox"; strings.Join(calls, " ") != want {
		t.Errorf("calls %v, want %s", calls, want)
	}
}

// A sandbox left not ready and empty (a killed agent's, caught half-made) is
// replaced, and removed in the same sync rather than a resync later.
func TestHalfMadeSandboxReplacedAndRemoved(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	old, err := h.RT.RunPodSandbox(h.Ctx, h.Syncer.b.sandboxConfig(pod, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RT.StopPodSandbox(h.Ctx, old); err != nil {
		t.Fatal(err)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.Steps(1)
	sbs, err := h.RT.ListPodSandbox(h.Ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].Id == old || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || sbs[0].Metadata.Attempt != 1 {
		t.Fatalf("sandboxes %v; want one, ready, attempt 1, not %s", sbs, old)
	}
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 1 {
		t.Errorf("%d running containers; want 1", n)
	}
}

// RemoveDeadContainers collects every pod at once, as a sync collects its
// own: of a container's exited instances only the newest stays, running
// containers stay, and a pod no sync has looked at since is collected too.
func TestRemoveDeadContainers(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	running := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(running) != 1 {
		t.Fatalf("%d running containers", len(running))
	}
	// Three exited instances of the container, as a pod leaves them when
	// it is not synced between restarts (or an agent before this one).
	st, err := h.RT.ContainerStatus(h.Ctx, running[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	var dead []string
	for i := range 3 {
		h.Clock.Step(time.Second)
		cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "a", Attempt: uint32(i + 1)},
			Image: st.Status.Image, Labels: st.Status.Labels, Annotations: st.Status.Annotations, LogPath: fmt.Sprintf("a/%d.log", i+1)}
		id, err := h.RT.CreateContainer(h.Ctx, running[0].PodSandboxId, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RT.StartContainer(h.Ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := h.RT.Exit(id, 1); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, id)
	}
	n, err := h.Syncer.RemoveDeadContainers(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("removed %d; want 2 (the older exited instances)", n)
	}
	var left []string
	cs, _ := h.RT.ListContainers(h.Ctx, nil)
	for _, c := range cs {
		left = append(left, c.Id)
	}
	slices.Sort(left)
	want := []string{running[0].Id, dead[2]}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("containers left %v; want the running one and the newest exited one %v", left, want)
	}
}

// A sync that sees a container created, when it has started since (its
// observation lagged, as container events can), finds it running when its
// start fails: no error, and the container is not reported waiting (the
// pod would go back to Pending).
func TestStaleCreatedContainerAlreadyStarted(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	states, err := h.Syncer.Relist(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := states[pod.UID]
	if stale == nil || len(stale.Containers) != 1 || !stale.Containers[0].Running() {
		t.Fatalf("relisted %+v; want one running container", stale)
	}
	ct := *stale.Containers[0]
	ct.State, ct.StartedAt = runtimeapi.ContainerState_CONTAINER_CREATED, time.Time{}
	stale.Containers[0] = &ct
	res, err := h.Syncer.SyncPod(h.Ctx, pod, stale)
	if err != nil {
		t.Fatalf("SyncPod on a stale view: %v", err)
	}
	if w, ok := res.Waiting["a"]; ok {
		t.Errorf("container a reported waiting (%s: %s); it runs", w.Reason, w.Message)
	}
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 1 {
		t.Errorf("%d running containers; want the one", n)
	}
}

// cutShortStart is the earlier agent's part of a cut-short start: it
// creates a pod's container, whose start then fails as if the agent went
// away. It returns the pod and the created container's ID.
func cutShortStart(t *testing.T, h *harness) (*corev1.Pod, string) {
	t.Helper()
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	fail := runtimetest.Errors(status.Error(codes.Unavailable, "the agent went away"))
	h.RT.SetHooks(runtimetest.Hooks{StartContainer: func(context.Context, string) error { return fail() }})
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.Steps(1)
	created := h.Containers(runtimeapi.ContainerState_CONTAINER_CREATED)
	if len(created) != 1 {
		t.Fatalf("%d created containers; want 1", len(created))
	}
	return pod, created[0].Id
}

// A container whose start an earlier agent left in flight and the runtime
// then aborted (exited, never started; containerd 1.6 and 2 do this) is
// replaced at the same restart count by the agent after it, and reported
// waiting to be created meanwhile, not as a failed start: the pod does not
// go Running (all its containers stopped) and then Pending again. The
// runtime may abort the start before the new agent relists (seen exited),
// after (seen created; its start then fails), or after the new agent's own
// start was refused because that start was still in flight.
func TestCutShortStartReplaced(t *testing.T) {
	for _, when := range []string{"beforeRelist", "afterRelist", "afterRefusedStart"} {
		abortAfterRelist := when != "beforeRelist"
		t.Run(when, func(t *testing.T) {
			h := newHarness(t)
			pod, old := cutShortStart(t, h)
			if !abortAfterRelist {
				if err := h.RT.AbortStart(old); err != nil {
					t.Fatal(err)
				}
			}
			// The next agent.
			h.Clock.Step(time.Second)
			h.Writer = &recordingWriter{}
			h.NewEngine()
			h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
			states, err := h.Syncer.Relist(h.Ctx)
			if err != nil {
				t.Fatal(err)
			}
			if when == "afterRefusedStart" {
				fail := runtimetest.Errors(status.Error(codes.Unknown, "container is already in starting state"))
				h.RT.SetHooks(runtimetest.Hooks{StartContainer: func(context.Context, string) error { return fail() }})
				res, err := h.Syncer.SyncPod(h.Ctx, pod, states[pod.UID])
				if err != nil {
					t.Fatalf("SyncPod while the earlier start is in flight: %v", err)
				}
				if w, ok := res.Waiting["a"]; ok {
					t.Errorf("container a reported waiting (%s: %s) while the earlier start is in flight", w.Reason, w.Message)
				}
				// Its waiting reason, had it one, would be kept below.
				states, err = h.Syncer.Relist(h.Ctx)
				if err != nil {
					t.Fatal(err)
				}
			}
			if abortAfterRelist {
				if err := h.RT.AbortStart(old); err != nil {
					t.Fatal(err)
				}
			}
			if when != "afterRelist" {
				if abortAfterRelist {
					if states, err = h.Syncer.Relist(h.Ctx); err != nil {
						t.Fatal(err)
					}
				}
				s := podsync.GeneratePodStatus(podsync.StatusInput{Pod: pod, State: states[pod.UID], Now: h.Clock.Now()})
				if s.Phase != corev1.PodPending || s.ContainerStatuses[0].State.Waiting == nil ||
					s.ContainerStatuses[0].State.Waiting.Reason != podsync.ReasonContainerCreating || s.ContainerStatuses[0].LastTerminationState.Terminated != nil {
					t.Errorf("status before the sync: phase %s, container %+v; want Pending, waiting ContainerCreating, no last state",
						s.Phase, s.ContainerStatuses[0])
				}
				// A waiting reason from a sync before does not make it an
				// exit either.
				s = podsync.GeneratePodStatus(podsync.StatusInput{Pod: pod, State: states[pod.UID], Now: h.Clock.Now(),
					Waiting: map[string]podsync.Waiting{"a": {Reason: podsync.ReasonRunContainerError, Message: "refused"}}})
				if s.Phase != corev1.PodPending || s.ContainerStatuses[0].LastTerminationState.Terminated != nil {
					t.Errorf("status with a waiting reason: phase %s, container %+v; want Pending, no last state", s.Phase, s.ContainerStatuses[0])
				}
			}
			res, err := h.Syncer.SyncPod(h.Ctx, pod, states[pod.UID])
			if err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			if w, ok := res.Waiting["a"]; ok {
				t.Errorf("container a reported waiting (%s: %s)", w.Reason, w.Message)
			}
			running := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
			if len(running) != 1 || running[0].Id == old || running[0].Metadata.Attempt != 0 {
				t.Fatalf("running containers %v; want one new one at attempt 0", running)
			}
			if _, err := h.RT.ContainerStatus(h.Ctx, old, false); status.Code(err) != codes.NotFound {
				t.Errorf("the cut-short container is still there (%v)", err)
			}
			states, err = h.Syncer.Relist(h.Ctx)
			if err != nil {
				t.Fatal(err)
			}
			s := podsync.GeneratePodStatus(podsync.StatusInput{Pod: pod, State: states[pod.UID], Now: h.Clock.Now()})
			if s.Phase != corev1.PodRunning || s.ContainerStatuses[0].RestartCount != 0 {
				t.Errorf("status after the sync: phase %s, restartCount %d; want Running, 0", s.Phase, s.ContainerStatuses[0].RestartCount)
			}
		})
	}
}

// A cut-short container the runtime will not remove (FailedPrecondition:
// containerd 2 keeps the task of a start cut short after the task was
// created, and no CRI call removes it) does not keep the pod from running:
// its replacement starts as a restart, as the kubelet would start it, with
// no crash-loop back-off, and later syncs leave the kept one alone.
func TestCutShortStartKeptByRuntime(t *testing.T) {
	h := newHarness(t)
	pod, old := cutShortStart(t, h)
	if err := h.RT.AbortStart(old); err != nil {
		t.Fatal(err)
	}
	var removes atomic.Int32
	h.RT.SetHooks(runtimetest.Hooks{RemoveContainer: func(_ context.Context, id string) error {
		if id != old {
			return nil
		}
		removes.Add(1)
		return status.Errorf(codes.FailedPrecondition, "failed to delete containerd container %q: cannot delete running task %s: failed precondition", id, id)
	}})

	// The next agent.
	h.Clock.Step(time.Second)
	h.Writer = &recordingWriter{}
	h.NewEngine()
	states, err := h.Syncer.Relist(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Syncer.SyncPod(h.Ctx, pod, states[pod.UID])
	if err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	if w, ok := res.Waiting["a"]; ok {
		t.Errorf("container a reported waiting (%s: %s)", w.Reason, w.Message)
	}
	if n := removes.Load(); n != 1 {
		t.Errorf("%d removals of the cut-short container tried; want 1", n)
	}
	running := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	if len(running) != 1 || running[0].Id == old || running[0].Metadata.Attempt != 1 {
		t.Fatalf("running containers %v; want one new one at attempt 1", running)
	}
	if st, err := h.RT.ContainerStatus(h.Ctx, old, false); err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("the cut-short container: %v, %v; want it kept, exited", st.GetStatus().GetState(), err)
	}

	states, err = h.Syncer.Relist(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := podsync.GeneratePodStatus(podsync.StatusInput{Pod: pod, State: states[pod.UID], Now: h.Clock.Now()})
	if s.Phase != corev1.PodRunning || s.ContainerStatuses[0].RestartCount != 1 || s.ContainerStatuses[0].State.Running == nil {
		t.Errorf("status after the sync: phase %s, container %+v; want Running, running at restartCount 1", s.Phase, s.ContainerStatuses[0])
	}
	if _, err := h.Syncer.SyncPod(h.Ctx, pod, states[pod.UID]); err != nil {
		t.Fatalf("second SyncPod: %v", err)
	}
	if n := removes.Load(); n != 1 {
		t.Errorf("%d removals of the kept container tried after a second sync; want still 1", n)
	}
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 1 {
		t.Errorf("%d running containers after a second sync; want 1", n)
	}
}

// A pod's log directory outlives its containers while a source has the pod
// (a completed pod's logs stay readable) and goes once the pod is removed.
func TestRemovedPodLogsRemoved(t *testing.T) {
	h := newHarness(t)
	done := busyboxPod(corev1.RestartPolicyNever, "a")
	done.Name, done.UID = "done", "uid-done"
	running := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(done)
	h.Add(running)
	logDir := func(p *corev1.Pod) string { return podsync.PodLogDir(h.Syncer.b.podLogRoot, p) }
	for _, p := range []*corev1.Pod{done, running} {
		if _, err := os.Stat(logDir(p)); err != nil {
			t.Fatalf("log directory of %s: %v", p.Name, err)
		}
	}
	// The completed pod terminates; its containers go, its logs stay.
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		if c.Labels["io.kubernetes.pod.name"] == done.Name {
			if err := h.RT.StopContainer(h.Ctx, c.Id, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.Steps(3)
	if lc, _ := h.Eng.PodLifecycle(done.UID); lc != podsync.Done {
		t.Fatalf("completed pod is %v, want Done", lc)
	}
	if _, err := os.Stat(logDir(done)); err != nil {
		t.Fatalf("the completed pod's logs went before the pod was removed: %v", err)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{done, running}})
	h.Steps(2)
	for _, p := range []*corev1.Pod{done, running} {
		if _, err := os.Stat(logDir(p)); !os.IsNotExist(err) {
			t.Errorf("log directory of removed pod %s: %v, want it gone", p.Name, err)
		}
	}
	if es, err := os.ReadDir(h.Syncer.b.podLogRoot); err != nil || len(es) != 0 {
		t.Errorf("pod log root holds %v (%v), want nothing", es, err)
	}
}

// CleanupPod refuses a pod whose log directory would not be a child of the
// log root.
func TestCleanupPodStaysInLogRoot(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Join(filepath.Dir(h.Syncer.b.podLogRoot), "keep_x_u")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "../keep", Name: "x", UID: "u"}}
	err := h.Syncer.CleanupPod(h.Ctx, pod)
	if err == nil || !strings.Contains(err.Error(), "is not below") {
		t.Fatalf("CleanupPod of %q: %v, want a refusal", pod.Namespace, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a directory outside the log root went: %v", err)
	}
}

// With podsync.Options.Sources, a pod the runtime runs is an orphan only once an
// update of every named source was handled: until the API source's first
// set arrives, a restarted engine keeps (and then adopts) the pod it knows
// from that source.
func TestOrphansWaitForEverySource(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Add(pod)
	running := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)
	// A new engine over the same runtime, fed by two sources.
	var err error
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"},
		Sources: []string{podsource.FileSource, podsource.APISource}})
	if err != nil {
		t.Fatal(err)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpSet, Source: podsource.FileSource})
	h.Steps(3)
	if got := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING); len(got) != 1 || got[0].Id != running[0].Id {
		t.Fatalf("running %v before the API source's first set, want %s kept", got, running[0].Id)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{pod}})
	h.Steps(3)
	if got := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING); len(got) != 1 || got[0].Id != running[0].Id {
		t.Fatalf("running %v after the API source's set, want %s adopted", got, running[0].Id)
	}
	// Without the pod in its sources' sets it is an orphan now.
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Source: podsource.APISource, Pods: []*corev1.Pod{pod}})
	h.Steps(3)
	if got := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING); len(got) != 0 {
		t.Fatalf("running %v after removal", got)
	}
}

// A container created but never started (the agent stopped between
// CreateContainer and StartContainer, here a failed start) is started as it
// is by the next sync, by a new engine as by the same one: no second
// container of the name, restartCount 0.
func TestEngineStartsCreatedContainer(t *testing.T) {
	for _, newEngine := range []bool{false, true} {
		t.Run(fmt.Sprintf("new engine %v", newEngine), func(t *testing.T) {
			h := newHarness(t)
			pod := busyboxPod(corev1.RestartPolicyAlways, "a")
			fail := runtimetest.Errors(errors.New("agent stopped"))
			h.RT.SetHooks(runtimetest.Hooks{StartContainer: func(context.Context, string) error { return fail() }})
			h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
			h.Steps(1)
			created := h.Containers(runtimeapi.ContainerState_CONTAINER_CREATED)
			if len(created) != 1 {
				t.Fatalf("%d created containers after the failed start; want 1", len(created))
			}
			if newEngine {
				h.NewEngine()
				h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
			}
			h.Steps(3)
			all, err := h.RT.ListContainers(h.Ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 1 || all[0].Id != created[0].Id || all[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Fatalf("containers %v; want %s alone, running", all, created[0].Id)
			}
			st := h.Writer.Last(pod.UID)
			if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].RestartCount != 0 || st.ContainerStatuses[0].State.Running == nil {
				t.Errorf("container statuses %+v; want one running, restartCount 0", st.ContainerStatuses)
			}
		})
	}
}

// PodVolumeDirs lists a pod's volume directories by name, whatever the
// plugin, and nothing for a UID that could leave PodRoot.
func TestPodVolumeDirs(t *testing.T) {
	root := t.TempDir()
	c, err := New(Options{Runtime: runtimetest.New(runtimetest.Options{}), PodLogRoot: root + "/logs", PodRoot: root + "/pods", ResolvConf: "-"})
	if err != nil {
		t.Fatal(err)
	}
	vols := filepath.Join(root, "pods", "uid-a", "volumes")
	for _, d := range []string{"kubernetes.io~empty-dir/scratch", "kubernetes.io~configmap/cfg"} {
		if err := os.MkdirAll(filepath.Join(vols, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vols, "kubernetes.io~empty-dir", "stray"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"scratch": filepath.Join(vols, "kubernetes.io~empty-dir", "scratch"),
		"cfg":     filepath.Join(vols, "kubernetes.io~configmap", "cfg"),
	}
	if got := c.PodVolumeDirs("uid-a"); !maps.Equal(got, want) {
		t.Errorf("PodVolumeDirs(uid-a) = %v; want %v", got, want)
	}
	for _, uid := range []string{"", "..", "../pods/uid-a", "uid-b"} {
		if got := c.PodVolumeDirs(uid); len(got) != 0 {
			t.Errorf("PodVolumeDirs(%q) = %v; want none", uid, got)
		}
	}
}
