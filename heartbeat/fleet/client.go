package fleet

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// nodeClient is the client one node's heartbeat and lease use: the fleet's
// client with the node's injected faults in front of status and lease
// writes, and counters of those writes.
type nodeClient struct {
	kubernetes.Interface
	n *Node
}

func (c *nodeClient) CoreV1() typedcorev1.CoreV1Interface {
	return coreV1{c.Interface.CoreV1(), c.n}
}

func (c *nodeClient) CoordinationV1() typedcoordinationv1.CoordinationV1Interface {
	return coordV1{c.Interface.CoordinationV1(), c.n}
}

type coreV1 struct {
	typedcorev1.CoreV1Interface
	n *Node
}

func (c coreV1) Nodes() typedcorev1.NodeInterface { return nodes{c.CoreV1Interface.Nodes(), c.n} }

type nodes struct {
	typedcorev1.NodeInterface
	n *Node
}

func isStatus(sub []string) bool { return len(sub) > 0 && sub[0] == "status" }

func (c nodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	if !isStatus(sub) {
		return c.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
	}
	if err := c.n.fault(faultStatus); err != nil {
		return nil, err
	}
	got, err := c.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
	if err == nil {
		c.n.statusWrites.Add(1)
	}
	return got, err
}

func (c nodes) UpdateStatus(ctx context.Context, node *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error) {
	if err := c.n.fault(faultStatus); err != nil {
		return nil, err
	}
	got, err := c.NodeInterface.UpdateStatus(ctx, node, opts)
	if err == nil {
		c.n.statusWrites.Add(1)
	}
	return got, err
}

type coordV1 struct {
	typedcoordinationv1.CoordinationV1Interface
	n *Node
}

func (c coordV1) Leases(ns string) typedcoordinationv1.LeaseInterface {
	if l := c.n.f.opts.Leases; l != nil {
		return leases{l(ns), c.n}
	}
	return leases{c.CoordinationV1Interface.Leases(ns), c.n}
}

type leases struct {
	typedcoordinationv1.LeaseInterface
	n *Node
}

func (c leases) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := c.n.fault(faultLease); err != nil {
		return nil, err
	}
	return c.LeaseInterface.Update(ctx, l, opts)
}

func (c leases) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if err := c.n.fault(faultLease); err != nil {
		return nil, err
	}
	return c.LeaseInterface.Create(ctx, l, opts)
}
