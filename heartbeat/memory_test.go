package heartbeat_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
)

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemoryPerNode reports what one heartbeating node (Heartbeat and
// its lease Renewer, after registration, a status post and a renewal)
// retains, the fake clientset's own copies excluded: the heap with the
// nodes alive minus the heap once they are released. Run with -benchtime=1x.
func BenchmarkMemoryPerNode(b *testing.B) {
	const n = 2000
	for range b.N {
		cs := fake.NewSimpleClientset()
		fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		setter := newKubeletLike(fc)
		ctx := context.Background()
		hbs := make([]*heartbeat.Heartbeat, n)
		for i := range hbs {
			hb, err := heartbeat.New(heartbeat.Options{
				Nodes: cs.CoreV1().Nodes(), Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: fmt.Sprintf("node-%05d", i), StatusSetter: setter, Clock: fc,
				LeaseOptions: lease.Options{Jitter: -1}, Jitter: -1,
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := hb.SyncStatus(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := hb.SyncLease(ctx); err != nil {
				b.Fatal(err)
			}
			hbs[i] = hb
		}
		cs.ClearActions()
		with := heapInUse()
		runtime.KeepAlive(hbs)
		hbs = nil
		without := heapInUse()
		runtime.KeepAlive(cs)
		b.ReportMetric(float64(with-without)/n, "B/node")
	}
}
