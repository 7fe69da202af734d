package podsynctest_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
)

func setup(t *testing.T, stages func(*corev1.Pod, string) podsynctest.Stages) (*clocktesting.FakeClock, *podsynctest.Backend, *podsync.Engine, func(n int)) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := podsynctest.New(podsynctest.Options{Clock: clock, Stages: stages})
	e, err := podsync.New(podsync.Options{Syncer: b, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	steps := func(n int) {
		for range n {
			e.RelistNow() // the backend changes behind the engine's back
			if _, err := e.SyncOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return clock, b, e, steps
}

func simPod(policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
}

func TestCrashLoopOnTheClock(t *testing.T) {
	clock, b, e, steps := setup(t, nil)
	pod := simPod(corev1.RestartPolicyAlways)
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	steps(2)
	for i, wait := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
		if !b.Exit(pod.UID, "c", 2) {
			t.Fatalf("round %d: nothing running", i)
		}
		steps(2)
		s, _ := e.PodStatus(pod.UID)
		if wait > 0 {
			if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != podsync.ReasonCrashLoopBackOff {
				t.Fatalf("round %d: %+v", i, s.ContainerStatuses[0].State)
			}
			clock.Step(wait)
			steps(2)
			s, _ = e.PodStatus(pod.UID)
		}
		if cs := s.ContainerStatuses[0]; cs.State.Running == nil || cs.RestartCount != int32(i+1) {
			t.Fatalf("round %d: %+v", i, cs)
		}
	}
}

func TestFailCreateAndRemove(t *testing.T) {
	_, b, e, steps := setup(t, func(*corev1.Pod, string) podsynctest.Stages { return podsynctest.Stages{FailCreate: "no space"} })
	pod := simPod(corev1.RestartPolicyAlways)
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	steps(2)
	s, _ := e.PodStatus(pod.UID)
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != podsync.ReasonCreateContainerError || w.Message != "no space" {
		t.Fatalf("%+v", s.ContainerStatuses[0].State)
	}
	e.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	steps(3)
	if _, ok := e.PodLifecycle(pod.UID); ok || len(b.Pods()) != 0 {
		t.Fatalf("pod kept: %v", b.Pods())
	}
}

// A sync asks for the next one when the pod's stages next change it, and
// reports a change the last relist did not see, so that an engine with a
// long relist period sees the simulation's changes when they happen.
func TestSyncPodFollowsTheStages(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := podsynctest.New(podsynctest.Options{Clock: clock, Stages: func(*corev1.Pod, string) podsynctest.Stages {
		return podsynctest.Stages{StartDelay: 2 * time.Second, RunFor: 5 * time.Second}
	}})
	pod := simPod(corev1.RestartPolicyNever)
	relist := func() *podsync.PodState {
		pods, err := b.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pods[pod.UID]
	}
	res, err := b.SyncPod(ctx, pod, nil)
	if err != nil || !res.Changed || res.RequeueAfter != 2*time.Second {
		t.Fatalf("first sync: %+v %v, want changed and the next sync at the start, 2s", res, err)
	}
	st := relist()
	if res, _ = b.SyncPod(ctx, pod, st); res.Changed {
		t.Fatalf("a sync with nothing new: %+v", res)
	}
	clock.Step(2 * time.Second)
	if res, _ = b.SyncPod(ctx, pod, st); !res.Changed || res.RequeueAfter != 5*time.Second {
		t.Fatalf("at the start: %+v, want changed (not relisted yet) and the next sync at the exit, 5s", res)
	}
	relist()
	clock.Step(5 * time.Second)
	if res, _ = b.SyncPod(ctx, pod, st); !res.Changed || res.RequeueAfter != 0 {
		t.Fatalf("at the exit: %+v, want changed and nothing more due", res)
	}
}

// A relist that finds a pod unchanged returns the PodState the last one
// returned; a change (a start, an exit, a stage reached on the clock) makes
// a new one, and the old one is left as it was.
func TestRelistReusesUnchangedState(t *testing.T) {
	ctx := context.Background()
	clock, b, e, steps := setup(t, func(*corev1.Pod, string) podsynctest.Stages {
		return podsynctest.Stages{StartDelay: time.Second}
	})
	pod := simPod(corev1.RestartPolicyNever)
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	steps(2)
	relist := func() *podsync.PodState {
		t.Helper()
		m, err := b.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m[pod.UID]
	}
	created := relist()
	if again := relist(); again != created {
		t.Fatal("an unchanged pod relisted as a new PodState")
	}
	if len(created.Containers) != 0 {
		t.Fatalf("container in the runtime during its start delay: %+v", created.Containers)
	}
	clock.Step(time.Second)
	running := relist()
	if running == created || len(running.Containers) != 1 || running.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after the start delay: %+v", running)
	}
	if one, _ := b.RelistPod(ctx, pod.UID); one != running {
		t.Error("RelistPod of an unchanged pod made a new PodState")
	}
	if !b.Exit(pod.UID, "c", 3) {
		t.Fatal("nothing running")
	}
	exited := relist()
	if exited == running || exited.Containers[0].State != runtimeapi.ContainerState_CONTAINER_EXITED || exited.Containers[0].ExitCode != 3 {
		t.Fatalf("after the exit: %+v", exited.Containers[0])
	}
	if running.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING || len(created.Containers) != 0 {
		t.Error("an earlier PodState was modified")
	}
}

// A relist's states are never changed afterwards: a change to the
// simulation makes new ones, and what did not change is shared.
func TestRelistStatesAreNotChangedLater(t *testing.T) {
	_, b, e, steps := setup(t, nil)
	pod := simPod(corev1.RestartPolicyNever)
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	steps(2)
	before, err := b.Relist(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	old := before[pod.UID]
	if len(old.Containers) != 1 || old.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING || len(old.Sandboxes) != 1 {
		t.Fatalf("before: %+v", old)
	}
	if !b.Exit(pod.UID, "c", 3) {
		t.Fatal("nothing running")
	}
	after, err := b.Relist(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	now := after[pod.UID]
	if c := now.Containers[0]; c.State != runtimeapi.ContainerState_CONTAINER_EXITED || c.ExitCode != 3 {
		t.Errorf("after the exit: %+v", c)
	}
	if c := old.Containers[0]; c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || c.ExitCode != 0 {
		t.Errorf("the earlier relist's container changed: %+v", c)
	}
	if now.Sandboxes[0] != old.Sandboxes[0] {
		t.Error("an unchanged sandbox's state was copied")
	}
	e.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	steps(3)
	if !old.Sandboxes[0].Ready() || now.Sandboxes[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("stopping the pod changed earlier relists' sandboxes: %+v %+v", old.Sandboxes[0], now.Sandboxes[0])
	}
}
