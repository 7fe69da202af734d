package heartbeattest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset returns client-go's fake clientset set up as an API server
// would be for a fleet: every object it creates gets a UID and a creation
// timestamp, so that leases get their owner reference and a recreated Node
// gets a new UID. UIDs are counted from 1 in creation order, so runs repeat.
//
// It uses the fake's plain object tracker (fake.NewSimpleClientset), which
// serves strategic-merge patches but not server-side apply. The tracker with
// field management (fake.NewClientset) serves apply too, but in client-go
// v0.37 it builds a REST mapper on every request (about 5ms each), too slow
// for fleets; pass one of those (through UIDClientset) only for nodes using
// heartbeat.ServerSideApply.
//
// The fake clientset records every request (Actions) for as long as it
// lives; in long simulations call ClearActions now and then.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	//lint:ignore SA1019 the field-managed tracker is far too slow for fleets.
	return UIDClientset(fake.NewSimpleClientset(objects...)) //nolint:staticcheck
}

// UIDClientset makes c give a UID and a creation timestamp to every object
// created without one, as NewClientset does, and returns it.
func UIDClientset(c *fake.Clientset) *fake.Clientset {
	var n atomic.Uint64
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		if m, ok := ca.GetObject().(metav1.Object); ok && m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", n.Add(1))))
			if ts := m.GetCreationTimestamp(); ts.IsZero() {
				m.SetCreationTimestamp(metav1.NewTime(time.Unix(0, 0).UTC()))
			}
		}
		return false, nil, nil
	})
	return c
}

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
	if t := c.n.f.tracker; t != nil {
		return trackerLeases{c.CoordinationV1Interface.Leases(ns), t, ns, c.n}
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

// tracked is a fake clientset whose object tracker the fleet may use
// directly (Options.FakeFastPath).
type tracked interface {
	Tracker() k8stesting.ObjectTracker
}

var leaseGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// trackerLeases serves a node's lease reads and writes from a fake
// clientset's object tracker, skipping its reactors and its record of
// actions.
type trackerLeases struct {
	typedcoordinationv1.LeaseInterface
	t  k8stesting.ObjectTracker
	ns string
	n  *Node
}

func (c trackerLeases) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	obj, err := c.t.Get(leaseGVR, c.ns, name)
	if err != nil {
		return nil, err
	}
	return obj.(*coordinationv1.Lease), nil
}

func (c trackerLeases) Create(ctx context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if err := c.n.fault(faultLease); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l = l.DeepCopy()
	if l.UID == "" {
		l.UID = types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012x", c.n.f.uids.Add(1)))
	}
	if err := c.t.Create(leaseGVR, l, c.ns); err != nil {
		return nil, err
	}
	return l, nil
}

func (c trackerLeases) Update(ctx context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := c.n.fault(faultLease); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The tracker stores a copy; the caller's object is its own.
	if err := c.t.Update(leaseGVR, l, c.ns); err != nil {
		return nil, err
	}
	return l, nil
}
