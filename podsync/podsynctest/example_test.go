package podsynctest_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
)

// A simulated pod that starts after 2s, runs 5s and fails, under
// restartPolicy Never, driven step by step on a fake clock.
func Example() {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	backend := podsynctest.New(podsynctest.Options{
		Clock: clock,
		Stages: func(*corev1.Pod, string) podsynctest.Stages {
			return podsynctest.Stages{StartDelay: 2 * time.Second, RunFor: 5 * time.Second, ExitCode: 1}
		},
	})
	engine, err := podsync.New(podsync.Options{Syncer: backend, Clock: clock})
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "work", Image: "busybox"}}}}
	engine.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})

	show := func() {
		s, _ := engine.PodStatus(pod.UID)
		cs := s.ContainerStatuses[0]
		state := "running"
		switch {
		case cs.State.Waiting != nil:
			state = "waiting " + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated %s (%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		l, _ := engine.PodLifecycle(pod.UID)
		fmt.Printf("t=%v %s ip=%s %s ready=%v [%s]\n", clock.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), s.Phase, s.PodIP, state, cs.Ready, l)
	}
	for _, step := range []time.Duration{0, time.Second, time.Second, 5 * time.Second} {
		clock.Step(step)
		for range 3 {
			_, _ = engine.SyncOnce(ctx)
		}
		show()
	}
	// Output:
	// t=0s Pending ip=10.88.0.2 waiting ContainerCreating ready=false [Syncing]
	// t=1s Pending ip=10.88.0.2 waiting ContainerCreating ready=false [Syncing]
	// t=2s Running ip=10.88.0.2 running ready=true [Syncing]
	// t=7s Failed ip=10.88.0.2 terminated Error (1) ready=false [Done]
}
