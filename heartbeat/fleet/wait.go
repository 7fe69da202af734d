package fleet

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultWaitTimeout bounds the Wait helpers when ctx has no deadline.
const DefaultWaitTimeout = 30 * time.Second

// pollEvery is how often the Wait helpers look at the API server between the
// fleet's own signals (wall time: others change objects too).
const pollEvery = 5 * time.Millisecond

// wait calls check after every batch of the fleet's steps and every 5ms of
// wall time until it reports done or ctx ends (DefaultWaitTimeout of wall
// time when ctx has no deadline).
func (f *Fleet) wait(ctx context.Context, what string, check func(ctx context.Context) (bool, string)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWaitTimeout)
		defer cancel()
	}
	tick := f.wall.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		changed := f.changed()
		done, last := check(ctx)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleet: waiting for %s (last seen: %s): %w", what, last, ctx.Err())
		case <-changed:
		case <-tick.C():
		}
	}
}

// WaitRenewals waits until the fleet's nodes have renewed their leases at
// least total times in all since New.
func (f *Fleet) WaitRenewals(ctx context.Context, total uint64) error {
	return f.wait(ctx, fmt.Sprintf("%d renewals", total), func(context.Context) (bool, string) {
		got := f.renewals.Load()
		return got >= total, fmt.Sprintf("%d", got)
	})
}

// WaitRenewals waits until the node has renewed its lease at least count
// times since New.
func (n *Node) WaitRenewals(ctx context.Context, count uint64) error {
	return n.f.wait(ctx, fmt.Sprintf("%d renewals of %s", count, n.name), func(context.Context) (bool, string) {
		got := n.renewals.Load()
		return got >= count, fmt.Sprintf("%d", got)
	})
}

// WaitRegistered waits until every node's Node is known to exist.
func (f *Fleet) WaitRegistered(ctx context.Context) error {
	return f.wait(ctx, "every node registered", func(context.Context) (bool, string) {
		s := f.Stats()
		return s.Registered == s.Nodes, fmt.Sprintf("%d of %d", s.Registered, s.Nodes)
	})
}

// WaitNode waits until the Node called name, as the API serves it, satisfies
// cond, and returns it. A Node that does not exist is passed as nil.
func (f *Fleet) WaitNode(ctx context.Context, name string, cond func(*corev1.Node) bool) (*corev1.Node, error) {
	var got *corev1.Node
	err := f.wait(ctx, "node "+name, func(ctx context.Context) (bool, string) {
		n, err := f.nodeClient.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			n = nil
		}
		if cond(n) {
			got = n
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describeNode(n)
	})
	return got, err
}

// WaitLease waits until the lease of the node called name, as the API serves
// it, satisfies cond, and returns it. A lease that does not exist is passed
// as nil.
func (f *Fleet) WaitLease(ctx context.Context, name string, cond func(*coordinationv1.Lease) bool) (*coordinationv1.Lease, error) {
	var got *coordinationv1.Lease
	err := f.wait(ctx, "lease "+name, func(ctx context.Context) (bool, string) {
		l, err := f.leaseClient.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			l = nil
		}
		if cond(l) {
			got = l
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "no renewTime"
		}
		return false, "renewTime " + l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	})
	return got, err
}

func describeNode(n *corev1.Node) string {
	s := ""
	for _, c := range n.Status.Conditions {
		s += fmt.Sprintf("%s=%s ", c.Type, c.Status)
	}
	return s
}

// ConditionIs returns a WaitNode condition: the node exists and has a
// condition of type t with status s.
func ConditionIs(t corev1.NodeConditionType, s corev1.ConditionStatus) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		if n == nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == t {
				return c.Status == s
			}
		}
		return false
	}
}

// ConditionAbsent returns a WaitNode condition: the node exists and has no
// condition of type t.
func ConditionAbsent(t corev1.NodeConditionType) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		if n == nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == t {
				return false
			}
		}
		return true
	}
}

// NodeGone is a WaitNode condition: the node does not exist.
func NodeGone(n *corev1.Node) bool { return n == nil }
