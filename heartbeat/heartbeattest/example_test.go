package heartbeattest_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
)

// Objects created through the clientset get a UID and a creation
// timestamp, as from an API server; the lease fast path serves the same
// objects without recording actions.
func Example() {
	ctx := context.Background()
	//lint:ignore SA1019 the field-managed tracker is far too slow for fleets.
	client := heartbeattest.UIDClientset(fake.NewSimpleClientset()) //nolint:staticcheck
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(node.Name, node.UID)

	client.ClearActions()
	leases := heartbeattest.TrackerLeases(client.Tracker(), corev1.NamespaceNodeLease)
	if _, err := leases.Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		fmt.Println("lease:", err)
	}
	fmt.Println("recorded actions:", len(client.Actions()))
	// Output:
	// node-a 00000000-0000-4000-8000-000000000001
	// lease: leases.coordination.k8s.io "node-a" not found
	// recorded actions: 0
}
