package status

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// Metric names registered through Options.Registerer.
const (
	// MetricRequests counts requests sent to the API server, by verb
	// ("list" or "get" to read a pod, "patch", "delete"), failed ones
	// included.
	MetricRequests = "nodekit_podstatus_requests_total"
	// MetricRequestFailures counts requests that failed, by verb.
	MetricRequestFailures = "nodekit_podstatus_request_failures_total"
	// MetricPatchBytes counts the bytes of the status patches sent.
	MetricPatchBytes = "nodekit_podstatus_patch_bytes_total"
)

// Verbs, the values of the verb label.
const (
	verbGet    = "get"
	verbList   = "list"
	verbPatch  = "patch"
	verbDelete = "delete"
)

type metrics struct {
	requests   *prometheus.CounterVec
	failures   *prometheus.CounterVec
	patchBytes prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests, Help: "Requests the pod status writer sent to the API server, by verb.",
		}, []string{"verb"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequestFailures, Help: "Requests of the pod status writer that failed, by verb.",
		}, []string{"verb"}),
		patchBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPatchBytes, Help: "Bytes of the pod status patches the writer sent.",
		}),
	}
	var err error
	if m.requests, err = promutil.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.failures, err = promutil.Register(reg, m.failures); err != nil {
		return nil, err
	}
	if m.patchBytes, err = promutil.Register(reg, m.patchBytes); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) request(verb string, err error) {
	m.requests.WithLabelValues(verb).Inc()
	if err != nil {
		m.failures.WithLabelValues(verb).Inc()
	}
}
