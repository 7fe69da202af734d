package cri

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// metrics are the kubelet's runtime metrics under its names and labels.
type metrics struct {
	runtimeErrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runtimeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
	}
	var err error
	if m.runtimeErrors, err = promutil.Register(reg, m.runtimeErrors); err != nil {
		return nil, err
	}
	return m, nil
}
