package nodeapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op, steadier than ns/op on shared cores: call it
// before the loop and the function it returns after.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

// BenchmarkSample is one usage sample of a node with 30 pods and 100
// containers on the fake runtime (its CRI calls are in-process) and a fake
// /proc and /sys.
func BenchmarkSample(b *testing.B) {
	f := newFixtureCounts(b, benchCounts())
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
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
	defer reportCPU(b)()
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

// BenchmarkSampleRuntimeCalls is the fake runtime's part of
// BenchmarkSample: the five CRI calls a sample makes, answered in-process.
func BenchmarkSampleRuntimeCalls(b *testing.B) {
	f := newFixtureCounts(b, benchCounts())
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		_, _ = f.rt.ListPodSandbox(ctx, nil)
		_, _ = f.rt.ListContainers(ctx, nil)
		_, _ = f.rt.ListContainerStats(ctx, nil)
		_, _ = f.rt.ListPodSandboxStats(ctx, nil)
		_, _ = f.rt.ImageFsInfo(ctx)
	}
}
