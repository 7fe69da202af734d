package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names registered through Options.Metrics.
const (
	MetricRenewals        = "nodekit_lease_renewals_total"
	MetricRenewalFailures = "nodekit_lease_renewal_failures_total"
	MetricRenewalDuration = "nodekit_lease_renewal_duration_seconds"
)

type metrics struct {
	renewals prometheus.Counter
	failures prometheus.Counter
	duration prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	renewals, err := register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricRenewals, Help: "Node lease renewals (creations included) that succeeded.",
	}))
	if err != nil {
		return nil, err
	}
	failures, err := register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricRenewalFailures, Help: "Node lease renewals that failed after all their attempts.",
	}))
	if err != nil {
		return nil, err
	}
	duration, err := register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricRenewalDuration,
		Help:    "Time one node lease renewal took, attempts and re-reads included.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}))
	if err != nil {
		return nil, err
	}
	return &metrics{renewals: renewals, failures: failures, duration: duration}, nil
}

// register registers c, or returns the collector already registered under the
// same description so that renewers sharing a registerer share metrics.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		var zero C
		return zero, fmt.Errorf("lease: Options.Metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) observe(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.duration.Observe(d.Seconds())
	if err != nil {
		m.failures.Inc()
	} else {
		m.renewals.Inc()
	}
}
