package heartbeat_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/lease"
)

// writes is the number of write requests (POST, PUT, PATCH) in c and the
// bytes of their bodies.
func writes(c testenv.APICount) (n int64, bytes int64) {
	verbs := c.Verbs()
	for _, v := range []string{http.MethodPost, http.MethodPut, http.MethodPatch} {
		n += verbs[v].Requests
		bytes += verbs[v].RequestBytes
	}
	return n, bytes
}

// BenchmarkWriteLoadPerHour measures what one idle node with the defaults
// writes to a real API server in one hour, for each strategy: the loops'
// steps are driven every 10s of a fake clock for 3600 simulated seconds
// (after registration), and a wrapping RoundTripper counts requests and
// request bytes. Run with -benchtime=1x; figures are per simulated hour.
func BenchmarkWriteLoadPerHour(b *testing.B) {
	if cp == nil {
		b.Skip("needs the test control plane")
	}
	for _, tc := range []struct {
		strategy heartbeat.HeartbeatStrategy
		name     string
		protobuf bool
	}{
		{heartbeat.LeaseStrategy(), "Lease", false},
		{heartbeat.StatusOnlyStrategy(), "StatusOnly", false},
		{heartbeat.LeaseStrategy(), "Lease", true},
		{heartbeat.StatusOnlyStrategy(), "StatusOnly", true},
	} {
		enc := "json"
		if tc.protobuf {
			enc = "protobuf"
		}
		b.Run("strategy="+tc.name+"/encoding="+enc, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				name := strings.ToLower("load-" + tc.name + "-" + enc)
				cfg, err := cp.NodeConfig(name)
				if err != nil {
					b.Fatal(err)
				}
				cfg.QPS = -1 // no client-side rate limit: only the count matters
				if tc.protobuf {
					cfg.ContentType = "application/vnd.kubernetes.protobuf"
				}
				m := &testenv.APICounter{}
				cfg.Wrap(m.Wrap)
				client, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					b.Fatal(err)
				}
				fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				hb, err := heartbeat.New(heartbeat.Options{
					Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: newKubeletLike(fc), Strategy: tc.strategy,
					Clock: fc, Jitter: -1, LeaseOptions: lease.Options{Jitter: -1},
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				step := func() {
					if err := hb.SyncStatus(ctx); err != nil {
						b.Fatal(err)
					}
					if _, err := hb.SyncLease(ctx); err != nil {
						b.Fatal(err)
					}
					fc.Step(10 * time.Second)
				}
				step() // registration, first post, lease creation
				m.Take()
				for range 360 {
					step()
				}
				hour := m.Take()
				w, bytes := writes(hour)
				b.ReportMetric(float64(w), "writes/h")
				b.ReportMetric(float64(bytes)/1024, "KiB/h")
				b.ReportMetric(float64(hour.Requests), "requests/h")
				admin := cp.AdminClient()
				_ = admin.CoreV1().Nodes().Delete(ctx, name, deleteNow)
				_ = admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, name, deleteNow)
			}
		})
	}
}
