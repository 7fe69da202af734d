package heartbeat_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
)

// A minimal heartbeating node on a fake clientset under a fake clock, its
// steps driven by hand: one minute with the default Lease strategy.
func Example() {
	client := fake.NewClientset()
	// The API server gives every new object a UID; the fake clientset does not.
	client.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Node).UID = "0a1b2c"
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ready := nodestatus.StatusSetterFunc(func(_ context.Context, n *corev1.Node) error {
		now := metav1.NewTime(clk.Now())
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].LastHeartbeatTime = now
				return nil
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		})
		return nil
	})
	hb, err := heartbeat.New(heartbeat.Options{
		Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace),
		NodeName:     "node-a",
		StatusSetter: ready,
		Clock:        clk,
		Node:         &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"example.com/pool": "edge"}}},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 6 { // Run calls SyncOnce when it asks to be called, 10s when idle
		if _, err := hb.SyncOnce(ctx); err != nil {
			panic(err)
		}
		if _, err := hb.SyncLease(ctx); err != nil {
			panic(err)
		}
		clk.Step(10 * time.Second)
	}
	writes := map[string]int{}
	for _, a := range client.Actions() {
		writes[a.GetVerb()+" "+a.GetResource().Resource]++
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	l := hb.Renewer().Latest()
	fmt.Println("node", node.Name, node.Labels["example.com/pool"], node.Status.Conditions[0].Type, node.Status.Conditions[0].Status)
	fmt.Println("lease renewed at", l.Spec.RenewTime.UTC().Format(time.TimeOnly), "owner", l.OwnerReferences[0].Kind, l.OwnerReferences[0].UID)
	fmt.Println("node writes:", writes["create nodes"], "create,", writes["patch nodes"], "status patch")
	fmt.Println("lease writes:", writes["create leases"], "create,", writes["update leases"], "updates")
	// Output:
	// node node-a edge Ready True
	// lease renewed at 00:00:50 owner Node 0a1b2c
	// node writes: 1 create, 0 status patch
	// lease writes: 1 create, 5 updates
}
