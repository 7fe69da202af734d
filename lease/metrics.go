package lease

import (
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
	renewals, err := promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricRenewals, Help: "Node lease renewals (creations included) that succeeded.",
	}))
	if err != nil {
		return nil, err
	}
	failures, err := promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricRenewalFailures, Help: "Node lease renewals that failed after all their attempts.",
	}))
	if err != nil {
		return nil, err
	}
	duration, err := promutil.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricRenewalDuration,
		Help:    "Time one node lease renewal took, attempts and re-reads included.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}))
	if err != nil {
		return nil, err
	}
	return &metrics{renewals: renewals, failures: failures, duration: duration}, nil
}

func (m *metrics) observe(d time.Duration, err error) {
	m.duration.Observe(d.Seconds())
	if err != nil {
		m.failures.Inc()
	} else {
		m.renewals.Inc()
	}
}
