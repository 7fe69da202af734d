package sidebyside

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/testenv"
)

// TestParseByOperation reads one histogram's sum and count by operation
// type from a node's /metrics and skips other series and histograms, and
// the delta between two readings names each operation with its mean.
func TestParseByOperation(t *testing.T) {
	before := parseByOperation(`# HELP kubelet_pod_worker_duration_seconds x
kubelet_pod_worker_duration_seconds_bucket{operation_type="create",le="0.005"} 0
kubelet_pod_worker_duration_seconds_sum{operation_type="create"} 1
kubelet_pod_worker_duration_seconds_count{operation_type="create"} 2
kubelet_pod_worker_duration_seconds_sum{operation_type="sync"} 0.5
kubelet_pod_worker_duration_seconds_count{operation_type="sync"} 5
kubelet_pod_start_duration_seconds_sum 9
kubelet_runtime_operations_duration_seconds_sum{operation_type="create_container"} 4
`, "kubelet_pod_worker_duration_seconds")
	after := parseByOperation(`kubelet_pod_worker_duration_seconds_sum{operation_type="create"} 7
kubelet_pod_worker_duration_seconds_count{operation_type="create"} 5
kubelet_pod_worker_duration_seconds_sum{operation_type="sync"} 0.5
kubelet_pod_worker_duration_seconds_count{operation_type="sync"} 5
kubelet_pod_worker_duration_seconds_sum{operation_type="update"} 0.25
kubelet_pod_worker_duration_seconds_count{operation_type="update"} 1
`, "kubelet_pod_worker_duration_seconds")
	if got, want := before["create"], (testenv.Histogram{Sum: 1, Count: 2}); got != want {
		t.Errorf("create before = %v, want %v", got, want)
	}
	if len(before) != 2 {
		t.Errorf("before = %v, want create and sync only", before)
	}
	if got, want := syncsDelta(before, after), "create 3 (mean 2.000 s), update 1 (mean 0.250 s)"; got != want {
		t.Errorf("syncsDelta = %q, want %q", got, want)
	}
	if got := syncsDelta(nil, after); got != "not read" {
		t.Errorf("syncsDelta(nil, …) = %q, want \"not read\"", got)
	}
}

// TestGatherByOperation reads the same sums and counts from a registry
// (testenv.Histograms by operation_type, as the floor reads its own).
func TestGatherByOperation(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ops_seconds", Help: "x"}, []string{"operation_type"})
	reg.MustRegister(h)
	h.WithLabelValues("start_container").Observe(2)
	h.WithLabelValues("start_container").Observe(1)
	h.WithLabelValues("run_podsandbox").Observe(0.5)
	got := testenv.Histograms(t, reg, "ops_seconds", "operation_type")
	if len(got) != 2 || got["start_container"] != (testenv.Histogram{Sum: 3, Count: 2}) || got["run_podsandbox"] != (testenv.Histogram{Sum: 0.5, Count: 1}) {
		t.Errorf("Histograms by operation_type = %v", got)
	}
	if got := testenv.Histograms(t, reg, "other", "operation_type"); len(got) != 0 {
		t.Errorf("Histograms of a metric not there = %v, want none", got)
	}
}

// testenvTicks is a second of CPU in clock ticks.
const testenvTicks = int64(testenv.TicksPerSecond)

// TestHostLine turns two readings into the control plane's and the
// bench's CPU in % of a core and the machine's busy share.
func TestHostLine(t *testing.T) {
	a := hostCPU{apiserver: 100, etcd: 10, bench: 5, busy: 1000, total: 2000}
	b := hostCPU{apiserver: 100 + 50*testenvTicks, etcd: 10 + 10*testenvTicks, bench: 5 + 2*testenvTicks, busy: 1750, total: 3000}
	got := hostLine(a, b, 100*time.Second)
	want := "the API server 50.0%, etcd 10.0% and the bench 2.0% of a core, the machine's CPUs 75% busy"
	if got != want {
		t.Errorf("hostLine = %q, want %q", got, want)
	}
}

// TestRuntimeLine turns two readings into the runtime's CPU in % of a core.
func TestRuntimeLine(t *testing.T) {
	a := runtimeCPU{containerd: 1, shims: 2, shimChildren: 3, forks: 4}
	b := runtimeCPU{containerd: 1 + 30*testenvTicks, shims: 2 + 20*testenvTicks, shimChildren: 3 + 10*testenvTicks, forks: 5}
	got := runtimeLine(a, b, 100*time.Second)
	want := "containerd 30.0%, its shims 20.0% and the runc they ran (starts, execs) 10.0% of a core"
	if got != want {
		t.Errorf("runtimeLine = %q, want %q", got, want)
	}
}
