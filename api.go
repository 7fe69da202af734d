package nodekit

import (
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/podsync/runtimeclass"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/status"
)

// NodeClient is what the halves use of the Nodes' client: client-go's
// typed client, or Client.Nodes.
type NodeClient interface {
	heartbeat.NodeClient
	podsource.NodeClient
}

// PodClient is what the pod half uses of the Pods' client of a namespace:
// client-go's typed client, or Client.Pods.
type PodClient interface {
	podsource.APIPodClient
	podsource.MirrorPodClient
	status.PodClient
}

// API is the API server as an agent's halves use it, one client per
// resource: Client.API for nodekit's small client, or, for tests on
// client-go's fake clientset,
//
//	nodekit.API{Nodes: cs.CoreV1().Nodes(),
//		Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace),
//		Pods:   func(ns string) nodekit.PodClient { return cs.CoreV1().Pods(ns) },
//		RuntimeClasses: cs.NodeV1().RuntimeClasses()}
type API struct {
	// Nodes reads and writes the Node. Required.
	Nodes NodeClient
	// Leases renews the node lease in kube-node-lease. Required by the
	// node half.
	Leases lease.LeaseClient
	// Pods returns the client of the pods of a namespace ("" for all).
	// Required by the pod half.
	Pods func(namespace string) PodClient
	// RuntimeClasses lists and watches the RuntimeClasses, which the pod
	// half resolves pods' runtimeClassName through. Default nil: every
	// RuntimeClass is not found (a pod naming one does not start).
	RuntimeClasses runtimeclass.Client
	// Events receives the agent's events. Default nil: events are dropped.
	Events record.EventSink
	// CloseConnections closes the client's connections after repeated
	// heartbeat failures. Default nil: nothing is closed.
	CloseConnections func()
}

// API returns c's clients as an API.
func (c *Client) API() *API {
	return &API{
		Nodes:            c.Nodes(),
		Leases:           c.Leases(lease.DefaultNamespace),
		Pods:             func(ns string) PodClient { return c.Pods(ns) },
		RuntimeClasses:   c.RuntimeClasses(),
		Events:           c.EventSink(),
		CloseConnections: c.CloseConnections,
	}
}
