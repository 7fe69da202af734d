package fleet_test

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/lease"
)

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestScale measures memory per node and the wall time of one 10s step for
// HEARTBEATTEST_SCALE nodes on the fake clientset under a fake clock. It is
// skipped unless that variable is set. HEARTBEATTEST_STATUS_FREQUENCY sets
// the status update frequency (default 10s); HEARTBEATTEST_HEAPPROFILE names
// a file for a heap profile taken after the steps. -short keeps the package's
// control plane (for the integration tests) from starting:
//
//	HEARTBEATTEST_SCALE=100000 go test -short -run TestScale -v -timeout 30m ./heartbeat/heartbeattest
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HEARTBEATTEST_SCALE"))
	if n <= 0 {
		t.Skip("set HEARTBEATTEST_SCALE=<nodes> to run")
	}
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	base := heapInUse()
	//lint:ignore SA1019 the field-managed tracker is far too slow for fleets.
	client := heartbeattest.UIDClientset(fake.NewSimpleClientset()) //nolint:staticcheck
	start := time.Now()
	statusEvery, _ := time.ParseDuration(os.Getenv("HEARTBEATTEST_STATUS_FREQUENCY"))
	f, err := fleet.New(fleet.Options{Nodes: client.CoreV1().Nodes(), Leases: heartbeattest.TrackerLeases(client.Tracker(), lease.DefaultNamespace), Count: n, Clock: clk, StatusUpdateFrequency: statusEvery})
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	afterNew := heapInUse()
	start = time.Now()
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	registered := time.Since(start)
	start = time.Now()
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	leases := time.Since(start)
	if s := f.Stats(); s.Registered != n || s.Renewals != uint64(n) {
		t.Fatalf("after start: %+v", s)
	}
	client.ClearActions()
	var steps []time.Duration
	for range 3 {
		start = time.Now()
		if err := f.Step(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, time.Since(start))
	}
	if s := f.Stats(); s.Renewals != uint64(4*n) {
		t.Fatalf("after 3 steps: %+v", s)
	}
	client.ClearActions()
	total := heapInUse()
	if p := os.Getenv("HEARTBEATTEST_HEAPPROFILE"); p != "" {
		out, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(out); err != nil {
			t.Fatal(err)
		}
		_ = out.Close()
	}
	runtime.KeepAlive(f)
	f = nil
	trackerOnly := heapInUse()
	runtime.KeepAlive(client)
	per := func(b uint64) float64 { return float64(b) / float64(n) / 1024 }
	t.Logf("nodes=%d GOMAXPROCS=%d", n, runtime.GOMAXPROCS(0))
	t.Logf("New: %v, %.2f KiB/node (fleet before any request)", built, per(afterNew-base))
	t.Logf("start: registration %v, first 10s step (lease creations, first status posts) %v", registered, leases)
	t.Logf("10s steps (renew %d leases, status rounds every %v): %v", n, max(statusEvery, 10*time.Second), steps)
	t.Logf("heap total %.2f KiB/node: fleet %.2f KiB/node, fake clientset's tracker (Node+Lease objects) %.2f KiB/node",
		per(total-base), per(total-trackerOnly), per(trackerOnly-base))
}
