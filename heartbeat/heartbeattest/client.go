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
	"k8s.io/client-go/kubernetes/fake"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
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

// TrackerLeases returns a fleet.Options.Leases that sends the nodes' lease
// reads and writes straight to c's object tracker: they skip the clientset's
// reactors and are not recorded in its Actions, and cost about a third as
// much. Watches and other readers see the leases as usual, and the fleet's
// injected lease faults (Node.FailLease) still apply. Leases it creates get
// a UID, as NewClientset's objects do.
func TrackerLeases(c *fake.Clientset) func(namespace string) typedcoordinationv1.LeaseInterface {
	var uids atomic.Uint64
	t := c.Tracker()
	return func(ns string) typedcoordinationv1.LeaseInterface {
		return trackerLeases{c.CoordinationV1().Leases(ns), t, ns, &uids}
	}
}

var leaseGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// trackerLeases serves lease reads and writes from a fake clientset's object
// tracker, skipping its reactors and its record of actions.
type trackerLeases struct {
	typedcoordinationv1.LeaseInterface
	t    k8stesting.ObjectTracker
	ns   string
	uids *atomic.Uint64
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

func (c trackerLeases) Update(ctx context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The tracker stores a copy; the caller's object is its own.
	if err := c.t.Update(leaseGVR, l, c.ns); err != nil {
		return nil, err
	}
	return l, nil
}
