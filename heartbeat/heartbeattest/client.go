package heartbeattest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// Reactor is the part of a fake clientset UIDClientset uses: client-go's
// *fake.Clientset is one.
type Reactor interface {
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
}

// UIDClientset sets c up as an API server would be for a fleet, and
// returns it: every object created without a UID gets one and a creation
// timestamp, so that leases get their owner reference and a recreated Node
// gets a new UID. UIDs are counted from 1 in creation order, so runs repeat.
//
//	client := heartbeattest.UIDClientset(fake.NewSimpleClientset())
//
// client-go's plain object tracker (fake.NewSimpleClientset) serves
// strategic-merge patches but not server-side apply. The tracker with field
// management (fake.NewClientset) serves apply too, but in client-go v0.37 it
// builds a REST mapper on every request (about 5ms each), too slow for
// fleets: use it only for nodes using heartbeat.ServerSideApply.
//
// The fake clientset records every request (Actions) for as long as it
// lives; in long simulations call ClearActions now and then.
func UIDClientset[C Reactor](c C) C {
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

// TrackerLeases returns a client of the leases in namespace that sends
// reads and writes straight to a fake clientset's object tracker (its
// Tracker()): they skip the clientset's reactors and are not recorded in
// its Actions, and cost about a third as much. Watches and other readers of
// the clientset see the leases as usual. Leases it creates get a UID, as
// UIDClientset's objects do. It is a lease.LeaseClient and a
// fleet.LeaseClient (fleet.Options.Leases; the fleet's injected lease faults
// still apply in front of it).
func TrackerLeases(tracker k8stesting.ObjectTracker, namespace string) *TrackerLeaseClient {
	return &TrackerLeaseClient{t: tracker, ns: namespace}
}

var leaseGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// TrackerLeaseClient serves the leases of one namespace from a fake
// clientset's object tracker, skipping its reactors and its record of
// actions. Options are ignored.
type TrackerLeaseClient struct {
	t    k8stesting.ObjectTracker
	ns   string
	uids atomic.Uint64
}

// Get reads a lease.
func (c *TrackerLeaseClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	obj, err := c.t.Get(leaseGVR, c.ns, name)
	if err != nil {
		return nil, err
	}
	return obj.(*coordinationv1.Lease), nil
}

// Create creates a lease, giving it a UID when it has none.
func (c *TrackerLeaseClient) Create(ctx context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l = l.DeepCopy()
	if l.UID == "" {
		l.UID = types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012x", c.uids.Add(1)))
	}
	if err := c.t.Create(leaseGVR, l, c.ns); err != nil {
		return nil, err
	}
	return l, nil
}

// Update writes a lease.
func (c *TrackerLeaseClient) Update(ctx context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The tracker stores a copy; the caller's object is its own.
	if err := c.t.Update(leaseGVR, l, c.ns); err != nil {
		return nil, err
	}
	return l, nil
}

// Delete deletes a lease.
func (c *TrackerLeaseClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.t.Delete(leaseGVR, c.ns, name, opts)
}
