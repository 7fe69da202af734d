package probe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// metrics are kubelet's probe metrics under kubelet's names and labels. The
// rule for every nodekit metric: kubelet's name and labels where kubelet has
// the same metric, nodekit_<package>_* otherwise.
type metrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

const (
	resultSuccessful = "successful"
	resultFailed     = "failed"
	resultUnknown    = "unknown"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober",
			Name:      "probe_total",
			Help:      "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober",
			Name:      "probe_duration_seconds",
			Help:      "Duration in seconds of a probe, whatever its result, as measured by the manager's clock.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
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

// bind resolves w's metric children once, so a probe costs no label lookup.
func (m *metrics) bind(w *worker) {
	t, c, p, ns, uid := w.key.typ.String(), w.key.name, w.pod.Name, w.pod.Namespace, string(w.pod.UID)
	w.mSuccess = m.total.WithLabelValues(t, resultSuccessful, c, p, ns, uid)
	w.mFailure = m.total.WithLabelValues(t, resultFailed, c, p, ns, uid)
	w.mUnknown = m.total.WithLabelValues(t, resultUnknown, c, p, ns, uid)
	w.mDuration = m.duration.WithLabelValues(t, c, p, ns)
}

// forget drops w's metric children.
func (m *metrics) forget(w *worker) {
	t, c, p, ns, uid := w.key.typ.String(), w.key.name, w.pod.Name, w.pod.Namespace, string(w.pod.UID)
	for _, r := range []string{resultSuccessful, resultFailed, resultUnknown} {
		m.total.DeleteLabelValues(t, r, c, p, ns, uid)
	}
	m.duration.DeleteLabelValues(t, c, p, ns)
}
