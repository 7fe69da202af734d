package lease

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// Metric names registered through Options.Registerer.
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

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promutil.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("lease: Options.Registerer: %w", err)
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
