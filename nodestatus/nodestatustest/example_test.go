package nodestatustest_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

// A simulated node: fake host facts and a fake runtime drive the default
// setters, and a test turns the node NotReady by failing the runtime.
func Example() {
	ctx := context.Background()
	host := nodestatustest.NewHost(nodestatustest.Facts("sim-1"))
	rt := nodestatustest.NewRuntime()
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{Hostname: "sim-1", Host: host, Runtime: rt})
	if err != nil {
		panic(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sim-1"}}
	ready := func() string {
		if err := setters.SetStatus(ctx, node); err != nil {
			fmt.Println("error:", err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return string(c.Status) + " " + c.Reason
			}
		}
		return "no Ready condition"
	}
	fmt.Println(ready())

	rt.SetRuntimeReady(false, "ShimDown", "the shim went away")
	fmt.Println(ready())
	// Output:
	// True KubeletReady
	// False KubeletNotReady
}
