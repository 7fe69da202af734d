package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	componentlease "k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lease"
)

// countUpdates makes ctx end after n lease updates on cs.
func countUpdates(cs *fake.Clientset, n int, cancel context.CancelFunc) {
	var done atomic.Int64
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if done.Add(1) == int64(n) {
			cancel()
		}
		return false, nil, nil
	})
}

// The fake clientset is the classic one (NewSimpleClientset): the
// field-managed tracker of NewClientset costs about 1.2 MB and 3,000
// allocations per update, which would hide both renewers' own costs.
//
// Both renewers are driven by the same loop (wait.JitterUntilWithContext,
// as component-helpers' Run) with a 1ns period, so that only the renewal
// differs; the first renewal (get + create) is done before the timer starts.

func BenchmarkRenewal(b *testing.B) {
	b.Run("impl=nodekit", func(b *testing.B) {
		cs := fake.NewSimpleClientset()
		r, err := lease.New(lease.Options{Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: "n1", NodeUID: "u1"})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := r.SyncOnce(ctx); err != nil {
			b.Fatal(err)
		}
		countUpdates(cs, b.N, cancel)
		b.ReportAllocs()
		b.ResetTimer()
		wait.JitterUntilWithContext(ctx, func(ctx context.Context) { _, _ = r.SyncOnce(ctx) }, time.Nanosecond, 0.04, true)
	})
	b.Run("impl=component-helpers", func(b *testing.B) {
		cs := fake.NewSimpleClientset()
		ctx, cancel := context.WithCancel(context.Background())
		first, firstCancel := context.WithCancel(context.Background())
		countUpdates(cs, 1, firstCancel)
		// Owner reference as kubelet sets it, so that both write the same lease.
		owner := func(l *coordinationv1.Lease) error {
			if len(l.OwnerReferences) == 0 {
				l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1"}}
			}
			return nil
		}
		c := componentlease.NewController(clock.RealClock{}, cs, "n1", 40, nil, time.Nanosecond, "n1", "kube-node-lease", owner)
		// Let it create the lease and renew once, untimed.
		c.Run(first)
		cs.ReactionChain = cs.ReactionChain[1:]
		countUpdates(cs, b.N, cancel)
		b.ReportAllocs()
		b.ResetTimer()
		c.Run(ctx)
	})
}

// BenchmarkSyncOnce is nodekit's renewal called directly, without a loop.
func BenchmarkSyncOnce(b *testing.B) {
	cs := fake.NewSimpleClientset()
	r, err := lease.New(lease.Options{Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: "n1", NodeUID: "u1"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.SyncOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
