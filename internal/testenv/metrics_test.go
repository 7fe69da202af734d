package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Histograms reads a histogram's sums and counts by one label, adding up
// the series that share its value and leaving out those without it.
func TestHistograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ops_seconds", Help: "x"}, []string{"operation_type", "code"})
	reg.MustRegister(h)
	h.WithLabelValues("start_container", "ok").Observe(2)
	h.WithLabelValues("start_container", "ok").Observe(1)
	h.WithLabelValues("start_container", "failed").Observe(4)
	h.WithLabelValues("run_podsandbox", "ok").Observe(0.5)
	got := Histograms(t, reg, "ops_seconds", "operation_type")
	if len(got) != 2 || got["start_container"] != (Histogram{Sum: 7, Count: 3}) || got["run_podsandbox"] != (Histogram{Sum: 0.5, Count: 1}) {
		t.Errorf("by operation_type = %v", got)
	}
	if got := Histograms(t, reg, "ops_seconds", "code"); got["failed"] != (Histogram{Sum: 4, Count: 1}) || got["ok"] != (Histogram{Sum: 3.5, Count: 3}) {
		t.Errorf("by code = %v", got)
	}
	if got := Histograms(t, reg, "ops_seconds", "node"); len(got) != 0 {
		t.Errorf("by a label not there = %v, want none", got)
	}
	if got := Histograms(t, reg, "other", "operation_type"); len(got) != 0 {
		t.Errorf("a metric not there = %v, want none", got)
	}
}
