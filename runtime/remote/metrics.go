package remote

import (
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/promutil"
)

// opMetrics are kubelet's runtime operation metrics, under its names,
// labels and buckets: every CRI call a Client makes (its dial's Version
// included) is counted and timed by its operation type (run_podsandbox,
// create_container, list_containers, …), its time from the call to its
// answer or error, timeout included, by Options.Clock; a container event
// stream is one call, recorded when it ends. (Failures are counted where
// they are acted on: podsync/cri's kubelet_runtime_operations_errors_total.)
type opMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	clock    clock.PassiveClock
}

func newOpMetrics(reg prometheus.Registerer, clk clock.PassiveClock) (*opMetrics, error) {
	m := &opMetrics{
		clock: clk,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "runtime_operations_duration_seconds",
			Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
			Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
		}, []string{"operation_type"}),
	}
	var err error
	if m.total, err = promutil.Register(reg, m.total); err != nil {
		return nil, err
	}
	if m.duration, err = promutil.Register(reg, m.duration); err != nil {
		return nil, err
	}
	return m, nil
}

// observe records one call of the CRI method name that began at start.
func (m *opMetrics) observe(name string, start time.Time) {
	op := operationType(name)
	m.total.WithLabelValues(op).Inc()
	m.duration.WithLabelValues(op).Observe(m.clock.Since(start).Seconds())
}

// operationType is kubelet's operation_type label for a CRI method: its
// name in snake case, with "PodSandbox" one word ("run_podsandbox") and
// UpdateContainerResources as "update_container".
func operationType(method string) string {
	if method == "UpdateContainerResources" {
		return "update_container"
	}
	method = strings.ReplaceAll(method, "PodSandbox", "Podsandbox")
	var b strings.Builder
	for i, r := range method {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
