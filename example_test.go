package nodekit_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
)

// A controller test against hollow nodes that run pods, under a fake
// clock: four replicas of a Deployment-like set become Ready on two nodes;
// then two of them crash, and the set counts two Ready until the kubelet's
// restarts bring them back.
func ExampleFleetPods() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := heartbeattest.UIDClientset(fake.NewClientset())
	var mu sync.Mutex
	sims := map[string]*podsynctest.Backend{} // each node's simulated containers
	fp, err := nodekit.NewFleetPods(nodekit.FleetPodsOptions{
		API:   &nodekit.API{Pods: func(ns string) nodekit.PodClient { return cs.CoreV1().Pods(ns) }},
		Clock: clock,
		Backend: func(n fleet.PodNode, podIP func(*corev1.Pod) string) podsync.BackendFunc {
			sim := podsynctest.New(podsynctest.Options{Clock: clock, PodIP: podIP})
			mu.Lock()
			sims[n.Name] = sim
			mu.Unlock()
			return func(podsync.BackendParts) (podsync.Backend, error) { return podsync.Backend{Syncer: sim}, nil }
		},
	})
	if err != nil {
		panic(err)
	}
	f, err := fleet.New(fleet.Options{Count: 2, Clock: clock, Nodes: cs.CoreV1().Nodes(),
		Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), Pods: fp.Node})
	if err != nil {
		panic(err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); _ = fp.Run(watchCtx) }()
	defer func() { stopWatch(); <-watched }()

	for i := range 4 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("web-", i), Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprint("node-", i%2), Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			panic(err)
		}
	}
	ready := func() (n int) {
		l, _ := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		for _, p := range l.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					n++
				}
			}
		}
		return n
	}
	// The shared watch delivers on its own goroutine: step the fleet's
	// clock a second at a time until the set reaches want.
	until := func(want int) {
		for ready() != want && ctx.Err() == nil {
			if err := f.Step(ctx, time.Second); err != nil {
				panic(err)
			}
		}
	}
	until(4)
	fmt.Println("ready:", ready())

	// Two containers die twice: the kubelet restarts a container at once
	// the first time, and after a 10s back-off the second; meanwhile the
	// controller under test sees two replicas not Ready.
	for range 2 {
		for i := range 2 {
			pod, _ := cs.CoreV1().Pods("default").Get(ctx, fmt.Sprint("web-", i), metav1.GetOptions{})
			mu.Lock()
			sims[pod.Spec.NodeName].Exit(pod.UID, "app", 1)
			mu.Unlock()
			fp.PodHalf(pod.Spec.NodeName).Engine().RelistNow()
			f.NodeByName(pod.Spec.NodeName).TriggerPods()
		}
		if err := f.SyncOnce(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("ready in the back-off:", ready())
	until(4)
	pod, _ := cs.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
	fmt.Println("ready again; web-0 restarts:", pod.Status.ContainerStatuses[0].RestartCount)
	// Output:
	// ready: 4
	// ready in the back-off: 2
	// ready again; web-0 restarts: 2
}
