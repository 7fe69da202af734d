package fleetapi_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/fleet/fleetapi"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// A server for a fleet's node APIs: node i is at Address(i); Add files a
// node's API under its address (give it as nodekit.FleetPodsOptions.OnNode),
// Setters makes the nodes report it, Serve serves them all on one listener
// (see TestIntegrationFleetNodeAPI in package nodekit for the whole).
func Example() {
	srv, err := fleetapi.New(fleetapi.Options{
		Port: 10250,
		Auth: nodeapi.AuthOptions{Anonymous: true, AlwaysAllow: true},
		Node: func(fleet.PodNode, func(context.Context) []*corev1.Pod) (nodeapi.Options, error) {
			return nodeapi.Options{}, nil // a real one serves podsynctest/simapi's Stats and Logs
		},
	})
	if err != nil {
		panic(err)
	}
	if err := srv.Add(fleet.PodNode{Index: 1, Name: "node-1"}, func(context.Context) []*corev1.Pod { return nil }); err != nil {
		panic(err)
	}
	for i := range 3 {
		a, _ := fleetapi.Address(i)
		fmt.Println(a)
	}
	// Output:
	// 127.64.0.1
	// 127.64.0.2
	// 127.64.0.3
}
