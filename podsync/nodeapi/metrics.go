package nodeapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The metrics of /metrics/resource, with kubelet's names and labels.
var (
	containerLabels = []string{"container", "pod", "namespace"}
	podLabels       = []string{"pod", "namespace"}

	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative CPU time the node used, in core-seconds.", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"The node's memory working set, in bytes.", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative CPU time the container used, in core-seconds.", containerLabels, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"The container's memory working set, in bytes.", containerLabels, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"When the container started, in seconds since the Unix epoch.", containerLabels, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative CPU time the pod used, in core-seconds.", podLabels, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"The pod's memory working set, in bytes.", podLabels, nil)
	scrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if the last usage sample could not be had, 0 otherwise.", nil, nil)
)

// resourceCollector turns the last usage sample into the resource metrics
// at each scrape, so that gone containers leave no series behind. Samples
// carry the time their figure was read, as kubelet's do (metrics-server
// uses it); container_start_time_seconds and resource_scrape_error carry
// none.
type resourceCollector struct {
	stats Stats
}

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, containerCPUDesc, containerMemoryDesc,
		containerStartDesc, podCPUDesc, podMemoryDesc, scrapeErrorDesc} {
		ch <- d
	}
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	var s *statsapi.Summary
	failed := 1.0
	if c.stats != nil {
		if snap := c.stats.Latest(); snap != nil && snap.Summary != nil {
			s = snap.Summary
			if snap.Err == nil {
				failed = 0
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
	if s == nil {
		return
	}
	cpu(ch, nodeCPUDesc, s.Node.CPU)
	mem(ch, nodeMemoryDesc, s.Node.Memory)
	for i := range s.Pods {
		p := &s.Pods[i]
		for j := range p.Containers {
			ct := &p.Containers[j]
			if ct.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue,
					float64(ct.StartTime.UnixNano())/float64(time.Second), ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
			cpu(ch, containerCPUDesc, ct.CPU, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			mem(ch, containerMemoryDesc, ct.Memory, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
		}
		cpu(ch, podCPUDesc, p.CPU, p.PodRef.Name, p.PodRef.Namespace)
		mem(ch, podMemoryDesc, p.Memory, p.PodRef.Name, p.PodRef.Namespace)
	}
}

func cpu(ch chan<- prometheus.Metric, d *prometheus.Desc, st *statsapi.CPUStats, labels ...string) {
	if st == nil || st.UsageCoreNanoSeconds == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(st.Time.Time,
		prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*st.UsageCoreNanoSeconds)/float64(time.Second), labels...))
}

func mem(ch chan<- prometheus.Metric, d *prometheus.Desc, st *statsapi.MemoryStats, labels ...string) {
	if st == nil || st.WorkingSetBytes == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(st.Time.Time,
		prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*st.WorkingSetBytes), labels...))
}
