package lease_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/lease"
)

// A renewer driven step by step under a fake clock: the first step creates
// the lease, later steps update it from the lease last written.
func Example() {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// The lease is created only once the Node's UID is known.
	r, err := lease.New(lease.Options{Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: client.CoreV1().Nodes(), NodeName: "node-a", Clock: clk, NodeUID: "0a1b2c"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		wait, err := r.SyncOnce(ctx)
		if err != nil {
			panic(err)
		}
		clk.Step(wait)
	}

	l := r.Latest()
	fmt.Println(l.Namespace+"/"+l.Name, *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds)
	fmt.Println("renewed at", l.Spec.RenewTime.UTC().Format(time.TimeOnly))
	fmt.Println("owner", l.OwnerReferences[0].Kind, l.OwnerReferences[0].Name, l.OwnerReferences[0].UID)
	for _, a := range client.Actions() {
		fmt.Print(a.GetVerb(), " ")
	}
	fmt.Println()
	// Output:
	// kube-node-lease/node-a node-a 40
	// renewed at 00:00:20
	// owner Node node-a 0a1b2c
	// get create update update
}
