package runtimeclass_test

import (
	"context"
	"fmt"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/podsync/runtimeclass"
)

// A pod's runtimeClassName resolves to the handler its sandbox runs with;
// a class that does not exist fails with the kubelet's error.
func Example() {
	cs := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata-qemu"})
	m, err := runtimeclass.New(runtimeclass.Options{Client: cs.NodeV1().RuntimeClasses()})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	for _, name := range []string{"kata", "gvisor"} {
		h, err := m.LookupRuntimeHandler(ctx, &name)
		fmt.Printf("%s: %q %v\n", name, h, err)
	}
	cancel()
	<-done
	// Output:
	// kata: "kata-qemu" <nil>
	// gvisor: "" runtimeclass.node.k8s.io "gvisor" not found
}
