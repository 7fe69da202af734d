package cri_test

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// The CRI syncer under podsync's engine, on the in-memory runtime: a pod
// starts, its container crashes and is restarted at once, crashes again
// and waits out a 10s back-off.
func Example() {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakeClock(start)
	rt := runtimetest.New(runtimetest.Options{Clock: clock})
	dir, _ := os.MkdirTemp("", "cri-example")
	defer os.RemoveAll(dir)

	syncer, err := cri.New(cri.Options{Runtime: rt, Clock: clock, PodLogRoot: dir + "/logs", PodRoot: dir + "/pods",
		ResolvConf: "-", HostIPs: []string{"192.0.2.10"}})
	if err != nil {
		panic(err)
	}
	engine, err := podsync.New(podsync.Options{Syncer: syncer, Clock: clock, HostIPs: []string{"192.0.2.10"}})
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{HostNetwork: true, RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "app", Image: runtimetest.BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent}}}}
	engine.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})

	step := func(what string) {
		for range 2 {
			engine.RelistNow() // observe at once what the runtime did, without a relist period
			_, _ = engine.SyncOnce(ctx)
		}
		s, _ := engine.PodStatus(pod.UID)
		cs := s.ContainerStatuses[0]
		state := "running"
		if w := cs.State.Waiting; w != nil {
			state = w.Reason
		}
		fmt.Printf("%-14s t=%-3v %s podIP=%s %s restarts=%d\n", what, clock.Since(start), s.Phase, s.PodIP, state, cs.RestartCount)
	}
	crash := func() {
		running, _ := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		_ = rt.Exit(running[0].Id, 1)
	}
	step("started")
	crash()
	step("first crash")
	crash()
	step("second crash")
	clock.Step(10 * time.Second)
	step("after back-off")
	// Output:
	// started        t=0s  Running podIP=192.0.2.10 running restarts=0
	// first crash    t=0s  Running podIP=192.0.2.10 running restarts=1
	// second crash   t=0s  Running podIP=192.0.2.10 CrashLoopBackOff restarts=1
	// after back-off t=10s Running podIP=192.0.2.10 running restarts=2
}
