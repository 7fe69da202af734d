package eviction

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// metrics are kubelet's eviction metrics under its names and labels.
type metrics struct {
	evictions *prometheus.CounterVec
	statsAge  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evictions",
			Help: "Cumulative number of pod evictions by eviction signal.",
		}, []string{"eviction_signal"}),
		statsAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "eviction_stats_age_seconds",
			Help:    "Time between when stats are collected, and when pod is evicted based on those stats by eviction signal.",
			Buckets: prometheus.DefBuckets,
		}, []string{"eviction_signal"}),
	}
	var err error
	if m.evictions, err = promutil.Register(reg, m.evictions); err != nil {
		return nil, err
	}
	if m.statsAge, err = promutil.Register(reg, m.statsAge); err != nil {
		return nil, err
	}
	return m, nil
}
