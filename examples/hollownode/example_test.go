package hollownode_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
)

// A hollow node under a fake clock: its simulated container starts 5s after
// it is created, runs 30s and exits 0, and the pod (restartPolicy
// OnFailure) succeeds, as the kubelet would report it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := heartbeattest.UIDClientset(fake.NewClientset())
	api := &nodekit.API{Nodes: cs.CoreV1().Nodes(), Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace),
		Pods: func(ns string) nodekit.PodClient { return cs.CoreV1().Pods(ns) }}
	sim := podsynctest.New(podsynctest.Options{Clock: clock, Stages: func(*corev1.Pod, string) podsynctest.Stages {
		return podsynctest.Stages{StartDelay: 5 * time.Second, RunFor: 30 * time.Second}
	}})
	pods, err := nodekit.NewPodHalf(nodekit.PodHalfOptions{NodeName: "hollow-1", API: api, HostIPs: []string{"192.0.2.2"}, Clock: clock,
		Backend: func(podsync.BackendParts) (podsync.Backend, error) { return podsync.Backend{Syncer: sim}, nil }})
	if err != nil {
		panic(err)
	}
	node, err := nodekit.NewNodeHalf(nodekit.NodeHalfOptions{NodeName: "hollow-1", API: api, Pods: pods, Clock: clock,
		Status: nodestatus.Options{Host: nodestatustest.NewHost(nodestatustest.Facts("hollow-1")), Runtime: nodestatustest.NewRuntime()}})
	if err != nil {
		panic(err)
	}
	var agent nodekit.Group
	_ = agent.Add("pods", pods)
	_ = agent.Add("node", node)
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()

	w, _ := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	_, _ = cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-job"},
		Spec: corev1.PodSpec{NodeName: "hollow-1", RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{{Name: "work", Image: "busybox"}}}}, metav1.CreateOptions{})
	// Each step of the fake clock is taken once the pod's status shows what
	// the previous one led to.
	steps := []time.Duration{5 * time.Second, 30 * time.Second}
	last := ""
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case err := <-done:
			fmt.Println("the agent stopped early:", err)
			return
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type != watch.Modified || len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		line := describe(p.Status.ContainerStatuses[0])
		if line == last {
			continue
		}
		last = line
		fmt.Printf("t=%-3v %s %s\n", clock.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), p.Status.Phase, line)
		if p.Status.Phase == corev1.PodSucceeded {
			break
		}
		if len(steps) > 0 {
			clock.Step(steps[0])
			steps = steps[1:]
		}
	}
	w.Stop()
	cancel()
	fmt.Println("stopped:", <-done)
	// Output:
	// t=0s  Pending waiting ContainerCreating restarts=0
	// t=5s  Running running restarts=0
	// t=35s Succeeded terminated Completed 0 restarts=0
	// stopped: <nil>
}

func describe(cs corev1.ContainerStatus) string {
	state := "running"
	if w := cs.State.Waiting; w != nil {
		state = "waiting " + w.Reason
	} else if t := cs.State.Terminated; t != nil {
		state = fmt.Sprintf("terminated %s %d", t.Reason, t.ExitCode)
	}
	return fmt.Sprintf("%s restarts=%d", state, cs.RestartCount)
}
