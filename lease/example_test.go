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
	r, err := lease.New(lease.Options{Client: client, NodeName: "node-a", Clock: clk})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := r.SyncOnce(ctx); err != nil {
			panic(err)
		}
		clk.Step(r.Interval())
	}
	r.SetOwner("0a1b2c") // the Node's UID, once it is registered
	_ = r.SyncOnce(ctx)

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
	// renewed at 00:00:30
	// owner Node node-a 0a1b2c
	// get create update update update
}
