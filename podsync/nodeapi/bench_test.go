package nodeapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// BenchmarkSample is one usage sample of a node with 30 pods and 100
// containers on the fake runtime (its CRI calls are in-process) and a fake
// /proc and /sys.
func BenchmarkSample(b *testing.B) {
	f := newFixtureCounts(b, benchCounts())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f.clk.Step(10 * time.Second)
		if err := f.coll.SyncOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchmarkServe(b *testing.B, target string) {
	f := newFixtureCounts(b, benchCounts())
	h := newHandler(b, nodeapi.Options{Stats: f.coll})
	req := httptest.NewRequest(http.MethodGet, target, nil)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
		n = w.Body.Len()
	}
	b.ReportMetric(float64(n), "bytes/response")
}

// BenchmarkServeSummary serves /stats/summary of 30 pods and 100 containers.
func BenchmarkServeSummary(b *testing.B) { benchmarkServe(b, "/stats/summary") }

// BenchmarkServeSummaryCPUMemory serves /stats/summary?only_cpu_and_memory=true.
func BenchmarkServeSummaryCPUMemory(b *testing.B) {
	benchmarkServe(b, "/stats/summary?only_cpu_and_memory=true")
}

// BenchmarkServeMetricsResource serves /metrics/resource of 30 pods and 100
// containers.
func BenchmarkServeMetricsResource(b *testing.B) { benchmarkServe(b, "/metrics/resource") }
