package fleet

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
)

// NodeClient is the part of a client of core/v1 Nodes a fleet uses: what
// its heartbeats use, and Delete (Node.Delete). Its methods are client-go's,
// so clientset.CoreV1().Nodes() is one as it is.
type NodeClient interface {
	heartbeat.NodeClient
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// LeaseClient is the part of a client of the Leases in kube-node-lease a
// fleet uses: what its renewers use, and Delete (Node.Delete).
// clientset.CoordinationV1().Leases(lease.DefaultNamespace) is one as it
// is, and so is heartbeattest.TrackerLeases.
type LeaseClient interface {
	lease.LeaseClient
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// nodeClient is the client of one node's heartbeat: the fleet's, with the
// node's injected faults in front of status writes, and a counter of them.
type nodeClient struct {
	NodeClient
	n *Node
}

func isStatus(sub []string) bool { return len(sub) > 0 && sub[0] == "status" }

func (c nodeClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	if !isStatus(sub) {
		return c.NodeClient.Patch(ctx, name, pt, data, opts, sub...)
	}
	if err := c.n.fault(faultStatus); err != nil {
		return nil, err
	}
	got, err := c.NodeClient.Patch(ctx, name, pt, data, opts, sub...)
	if err == nil {
		c.n.statusWrites.Add(1)
	}
	return got, err
}

// leaseClient is the client of one node's renewer: the fleet's, with the
// node's injected faults in front of lease writes.
type leaseClient struct {
	lease.LeaseClient
	n *Node
}

func (c leaseClient) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := c.n.fault(faultLease); err != nil {
		return nil, err
	}
	return c.LeaseClient.Update(ctx, l, opts)
}

func (c leaseClient) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if err := c.n.fault(faultLease); err != nil {
		return nil, err
	}
	return c.LeaseClient.Create(ctx, l, opts)
}
