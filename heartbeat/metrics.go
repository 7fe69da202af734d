package heartbeat

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// Metric names registered through Options.Registerer.
const (
	MetricRegistrations        = "nodekit_heartbeat_registrations_total"
	MetricRegistrationFailures = "nodekit_heartbeat_registration_failures_total"
	MetricStatusRounds         = "nodekit_heartbeat_status_rounds_total"
	MetricStatusPosts          = "nodekit_heartbeat_status_posts_total"
	MetricStatusFailures       = "nodekit_heartbeat_status_failures_total"
	MetricStatusDuration       = "nodekit_heartbeat_status_duration_seconds"
)

type metrics struct {
	registrations prometheus.Counter
	regFailures   prometheus.Counter
	rounds        prometheus.Counter
	posts         prometheus.Counter
	failures      prometheus.Counter
	duration      prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string) (prometheus.Counter, error) {
		return promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	var (
		m   metrics
		err error
	)
	if m.registrations, err = counter(MetricRegistrations, "Successful node registrations (creations and reconciliations of an existing node)."); err != nil {
		return nil, err
	}
	if m.regFailures, err = counter(MetricRegistrationFailures, "Failed node registration attempts."); err != nil {
		return nil, err
	}
	if m.rounds, err = counter(MetricStatusRounds, "Node status rounds (computations), posted or not."); err != nil {
		return nil, err
	}
	if m.posts, err = counter(MetricStatusPosts, "Node status writes that succeeded."); err != nil {
		return nil, err
	}
	if m.failures, err = counter(MetricStatusFailures, "Node status rounds that failed after all their attempts."); err != nil {
		return nil, err
	}
	if m.duration, err = promutil.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricStatusDuration,
		Help:    "Time one node status round took, attempts included.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *metrics) registration(err error) {
	if err != nil {
		m.regFailures.Inc()
	} else {
		m.registrations.Inc()
	}
}

func (m *metrics) status(d time.Duration, posted bool, err error) {
	m.rounds.Inc()
	m.duration.Observe(d.Seconds())
	switch {
	case err != nil:
		m.failures.Inc()
	case posted:
		m.posts.Inc()
	}
}
