package fleet_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/lease"
)

// A fleet of three nodes under a fake clock: one node's agent dies, another
// reports a condition of its own.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	//lint:ignore SA1019 the field-managed tracker is far too slow for fleets.
	client := heartbeattest.UIDClientset(fake.NewSimpleClientset()) //nolint:staticcheck
	fl, err := fleet.New(fleet.Options{
		Nodes:  client.CoreV1().Nodes(),
		Leases: client.CoordinationV1().Leases(lease.DefaultNamespace),
		Count:  3,
		Clock:  clk,
	})
	if err != nil {
		panic(err)
	}
	if err := fl.SyncOnce(ctx); err != nil { // registers the nodes
		panic(err)
	}
	if err := fl.Step(ctx, 10*time.Second); err != nil { // creates the leases
		panic(err)
	}
	fl.Node(1).Stop()
	fl.Node(2).SetCondition(corev1.NodeCondition{Type: "example.com/DiskHealthy", Status: corev1.ConditionFalse, Reason: "SMARTFailing"})
	if err := fl.Step(ctx, time.Minute); err != nil { // six 10s steps
		panic(err)
	}
	for i := range fl.Len() {
		n := fl.Node(i)
		l, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name(), metav1.GetOptions{})
		node, _ := client.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
		fmt.Printf("%s: %d renewals, lease age %v, conditions:", n.Name(), n.Renewals(), clk.Since(l.Spec.RenewTime.Time))
		for _, c := range node.Status.Conditions {
			fmt.Printf(" %s=%s", c.Type, c.Status)
		}
		fmt.Println()
	}
	// Output:
	// node-0: 7 renewals, lease age 0s, conditions: MemoryPressure=False DiskPressure=False PIDPressure=False Ready=True
	// node-1: 1 renewals, lease age 1m0s, conditions: MemoryPressure=False DiskPressure=False PIDPressure=False Ready=True
	// node-2: 7 renewals, lease age 0s, conditions: MemoryPressure=False DiskPressure=False PIDPressure=False Ready=True example.com/DiskHealthy=False
}

// staleLabel marks nodes whose lease is stale.
const staleLabel = "example.com/lease-stale"

// staleMarker is a toy controller under test: it labels the nodes whose
// lease was last renewed more than 40s ago, and unlabels them when they
// renew again. Its step lists the leases and patches only the nodes whose
// mark changes, remembering what it marked.
type staleMarker struct {
	client kubernetes.Interface
	clock  clock.PassiveClock
	marked map[string]bool
}

func (m *staleMarker) SyncOnce(ctx context.Context) error {
	leases, err := m.client.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	now := m.clock.Now()
	for _, l := range leases.Items {
		stale := l.Spec.RenewTime == nil || now.Sub(l.Spec.RenewTime.Time) > 40*time.Second
		if stale == m.marked[l.Name] {
			continue
		}
		patch := `{"metadata":{"labels":{"` + staleLabel + `":null}}}`
		if stale {
			patch = `{"metadata":{"labels":{"` + staleLabel + `":"true"}}}`
		}
		if _, err := m.client.CoreV1().Nodes().Patch(ctx, l.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
		m.marked[l.Name] = stale
	}
	return nil
}

// Testing a controller against 1,000 fake nodes over 10 simulated minutes:
// 100 nodes die as minute 1 begins and half of them come back as minute 5
// begins; 10 nodes lose only their lease as minute 7 begins. The controller
// runs after every 10s step and catches each change within the minute. This runs in well under a second of wall time on an idle
// machine: the leases go straight to the fake clientset's tracker
// (heartbeattest.TrackerLeases), and since the controller reads only leases, status rounds
// are turned down to every 5 minutes and post only changes.
func Example_staleLeaseController() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	//lint:ignore SA1019 the field-managed tracker is far too slow for fleets.
	client := heartbeattest.UIDClientset(fake.NewSimpleClientset()) //nolint:staticcheck
	fl, err := fleet.New(fleet.Options{
		Nodes:                 client.CoreV1().Nodes(),
		Leases:                heartbeattest.TrackerLeases(client.Tracker(), lease.DefaultNamespace),
		Count:                 1000,
		Clock:                 clk,
		StatusUpdateFrequency: 5 * time.Minute,
		Strategy:              heartbeat.CustomStrategy{UseLease: true, Post: func(s heartbeat.PostState) bool { return s.Changed }},
	})
	if err != nil {
		panic(err)
	}
	ctrl := &staleMarker{client: client, clock: clk, marked: map[string]bool{}}
	if err := fl.SyncOnce(ctx); err != nil {
		panic(err)
	}
	if err := fl.Step(ctx, 10*time.Second); err != nil {
		panic(err)
	}
	count := func() int {
		n := 0
		for _, v := range ctrl.marked {
			if v {
				n++
			}
		}
		return n
	}
	for minute := 1; minute <= 10; minute++ {
		switch minute {
		case 1:
			for i := range 100 {
				fl.Node(i).Stop()
			}
		case 5:
			for i := range 50 {
				fl.Node(i).Resume()
			}
		case 7:
			for i := 900; i < 910; i++ {
				fl.Node(i).StopLease()
			}
		}
		for range 6 {
			if err := fl.Step(ctx, 10*time.Second); err != nil {
				panic(err)
			}
			if err := ctrl.SyncOnce(ctx); err != nil {
				panic(err)
			}
		}
		fresh, running, _ := fl.Freshness(40 * time.Second)
		fmt.Printf("minute %2d: %4d running, %4d fresh, %3d marked stale\n", minute, running, fresh, count())
	}
	stale, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: staleLabel})
	fmt.Println("nodes labelled stale:", len(stale.Items), "first:", stale.Items[0].Name)
	// Output:
	// minute  1:  900 running,  900 fresh, 100 marked stale
	// minute  2:  900 running,  900 fresh, 100 marked stale
	// minute  3:  900 running,  900 fresh, 100 marked stale
	// minute  4:  900 running,  900 fresh, 100 marked stale
	// minute  5:  950 running,  950 fresh,  50 marked stale
	// minute  6:  950 running,  950 fresh,  50 marked stale
	// minute  7:  940 running,  940 fresh,  60 marked stale
	// minute  8:  940 running,  940 fresh,  60 marked stale
	// minute  9:  940 running,  940 fresh,  60 marked stale
	// minute 10:  940 running,  940 fresh,  60 marked stale
	// nodes labelled stale: 60 first: node-50
}
