package eviction_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync/eviction"
)

func startRun(t *testing.T, f *fixture) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- f.m.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}
}

// Run syncs every Period on the clock and returns nil when its context ends.
func TestRun(t *testing.T) {
	defer leakcheck.Check(t)()
	snap := eviction.Snapshot{Memory: memory(10*Mi, Gi), Pods: []eviction.PodUsage{memUsage("a", Gi), memUsage("b", Gi)}}
	f := newFixture(t, eviction.Options{}, snap, newPod("a"), newPod("b"))
	stop := startRun(t, f)
	defer stop()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "first sync", func() bool { return f.obs.Calls() == 1 && f.clock.HasWaiters() })
	if n := len(f.evicted()); n != 1 {
		t.Fatalf("%d evictions after the first sync", n)
	}
	f.clock.Step(eviction.DefaultPeriod - time.Millisecond)
	if f.obs.Calls() != 1 {
		t.Fatal("synced before the period")
	}
	f.clock.Step(time.Millisecond)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "second sync", func() bool { return f.obs.Calls() == 2 && f.clock.HasWaiters() })
	if n := len(f.evicted()); n != 2 {
		t.Fatalf("%d evictions after the second sync", n)
	}
}

// With PodCleanedUp, Run polls it every second after an eviction and syncs
// as soon as the pod is cleaned up.
func TestRunWaitsForCleanup(t *testing.T) {
	defer leakcheck.Check(t)()
	var cleaned atomic.Bool
	var polls atomic.Int32
	snap := eviction.Snapshot{Memory: memory(10*Mi, Gi), Pods: []eviction.PodUsage{memUsage("a", Gi), memUsage("b", Gi)}}
	f := newFixture(t, eviction.Options{}, snap, newPod("a"), newPod("b"))
	f.m = mustNew(t, f, eviction.Options{PodCleanedUp: func(*corev1.Pod) bool { polls.Add(1); return cleaned.Load() }})
	stop := startRun(t, f)
	defer stop()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "first sync", func() bool { return f.obs.Calls() == 1 && f.clock.HasWaiters() })
	f.clock.Step(eviction.PodCleanupPoll)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "first poll", func() bool { return polls.Load() == 1 })
	if f.obs.Calls() != 1 {
		t.Fatal("synced before the pod was cleaned up")
	}
	cleaned.Store(true)
	f.clock.Step(eviction.PodCleanupPoll)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "sync after cleanup", func() bool { return f.obs.Calls() == 2 && len(f.evicted()) == 2 })
}

// SyncOnce alone is the step Run loops: it evicts and asks for the first
// poll; the next steps only poll PodCleanedUp until the pod is cleaned up,
// and the one that finds it cleaned up syncs again. A pod never cleaned up
// is waited for PodCleanupTimeout.
func TestSyncOnceWaitsForCleanup(t *testing.T) {
	var cleaned atomic.Bool
	var polls atomic.Int32
	snap := eviction.Snapshot{Memory: memory(10*Mi, Gi), Pods: []eviction.PodUsage{memUsage("a", Gi), memUsage("b", Gi), memUsage("c", Gi)}}
	f := newFixture(t, eviction.Options{}, snap, newPod("a"), newPod("b"), newPod("c"))
	f.m = mustNew(t, f, eviction.Options{PodCleanedUp: func(*corev1.Pod) bool { polls.Add(1); return cleaned.Load() }})
	step := func(want time.Duration) {
		t.Helper()
		d, err := f.m.SyncOnce(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d != want {
			t.Fatalf("SyncOnce asked to wait %v, want %v", d, want)
		}
	}

	step(eviction.PodCleanupPoll)
	if n := len(f.evicted()); n != 1 || f.obs.Calls() != 1 {
		t.Fatalf("first step: %d evictions, %d observations", n, f.obs.Calls())
	}
	for i := 1; i <= 3; i++ {
		f.clock.Step(eviction.PodCleanupPoll)
		step(eviction.PodCleanupPoll)
		if polls.Load() != int32(i) || f.obs.Calls() != 1 || len(f.evicted()) != 1 {
			t.Fatalf("poll %d: %d polls, %d observations, %d evictions", i, polls.Load(), f.obs.Calls(), len(f.evicted()))
		}
	}
	cleaned.Store(true)
	f.clock.Step(eviction.PodCleanupPoll)
	step(eviction.PodCleanupPoll) // cleaned up: syncs, evicts the next pod
	if polls.Load() != 4 || f.obs.Calls() != 2 || len(f.evicted()) != 2 {
		t.Fatalf("after cleanup: %d polls, %d observations, %d evictions", polls.Load(), f.obs.Calls(), len(f.evicted()))
	}

	// Never cleaned up: the wait ends PodCleanupTimeout after the eviction.
	cleaned.Store(false)
	f.clock.Step(eviction.PodCleanupTimeout - time.Millisecond)
	step(time.Millisecond)
	if f.obs.Calls() != 2 {
		t.Fatal("synced before the cleanup timeout")
	}
	f.clock.Step(time.Millisecond)
	step(eviction.PodCleanupPoll)
	if f.obs.Calls() != 3 || len(f.evicted()) != 3 {
		t.Fatalf("after the timeout: %d observations, %d evictions", f.obs.Calls(), len(f.evicted()))
	}
}

// Without PodCleanedUp, SyncOnce asks for Period.
func TestSyncOnceWait(t *testing.T) {
	snap := eviction.Snapshot{Memory: memory(10*Mi, Gi), Pods: []eviction.PodUsage{memUsage("a", Gi)}}
	f := newFixture(t, eviction.Options{}, snap, newPod("a"))
	if d, err := f.m.SyncOnce(f.ctx); err != nil || d != eviction.DefaultPeriod {
		t.Fatalf("SyncOnce = %v, %v; want %v", d, err, eviction.DefaultPeriod)
	}
}
