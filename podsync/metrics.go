package podsync

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/promutil"
)

// metrics are the kubelet's pod-sync metrics under its names and labels.
type metrics struct {
	podStart          prometheus.Histogram
	workerDuration    *prometheus.HistogramVec
	runningPods       prometheus.Gauge
	runningContainers *prometheus.GaugeVec
	rejected          *prometheus.CounterVec
	preemptions       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_duration_seconds",
			Help:    "Duration in seconds from the engine first seeing a pod to the pod running.",
			Buckets: []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600},
		}),
		workerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_worker_duration_seconds",
			Help:    "Duration in seconds to sync a single pod, by operation type: create, update or sync.",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"}),
		runningPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "running_pods",
			Help: "Number of pods that have a running pod sandbox.",
		}),
		runningContainers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "running_containers",
			Help: "Number of containers currently running, by state.",
		}, []string{"container_state"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "admission_rejections_total",
			Help: "Cumulative number of pods rejected at admission, by reason.",
		}, []string{"reason"}),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "preemptions",
			Help: "Cumulative number of pod preemptions by preemption resource",
		}, []string{"preemption_signal"}),
	}
	var err error
	if m.podStart, err = promutil.Register(reg, m.podStart); err != nil {
		return nil, err
	}
	if m.workerDuration, err = promutil.Register(reg, m.workerDuration); err != nil {
		return nil, err
	}
	if m.runningPods, err = promutil.Register(reg, m.runningPods); err != nil {
		return nil, err
	}
	if m.runningContainers, err = promutil.Register(reg, m.runningContainers); err != nil {
		return nil, err
	}
	if m.rejected, err = promutil.Register(reg, m.rejected); err != nil {
		return nil, err
	}
	if m.preemptions, err = promutil.Register(reg, m.preemptions); err != nil {
		return nil, err
	}
	return m, nil
}
