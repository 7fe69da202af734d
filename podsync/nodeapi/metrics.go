package nodeapi

import (
	"math"
	"net/http"
	"strconv"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// metricsContentType is the Prometheus text format, version 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// family is one metric of /metrics/resource, with kubelet's name, type and
// labels.
type family struct {
	name, help, typ string
	// each calls emit for each series: label values (container, namespace,
	// pod order, as the names sort), value, and time (zero: none).
	each func(s *statsapi.Summary, emit func(labels []string, v float64, t time.Time))
}

// The families, sorted by name as a Prometheus registry writes them.
var families = []family{
	{"container_cpu_usage_seconds_total", "Cumulative CPU time the container used, in core-seconds.", "counter",
		func(s *statsapi.Summary, emit func([]string, float64, time.Time)) {
			eachContainer(s, func(p *statsapi.PodStats, c *statsapi.ContainerStats, l []string) {
				if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
					emit(l, seconds(*c.CPU.UsageCoreNanoSeconds), c.CPU.Time.Time)
				}
			})
		}},
	{"container_memory_working_set_bytes", "The container's memory working set, in bytes.", "gauge",
		func(s *statsapi.Summary, emit func([]string, float64, time.Time)) {
			eachContainer(s, func(p *statsapi.PodStats, c *statsapi.ContainerStats, l []string) {
				if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
					emit(l, float64(*c.Memory.WorkingSetBytes), c.Memory.Time.Time)
				}
			})
		}},
	{"container_start_time_seconds", "When the container started, in seconds since the Unix epoch.", "gauge",
		func(s *statsapi.Summary, emit func([]string, float64, time.Time)) {
			eachContainer(s, func(p *statsapi.PodStats, c *statsapi.ContainerStats, l []string) {
				if c.StartTime.Unix() > 0 {
					emit(l, float64(c.StartTime.UnixNano())/float64(time.Second), time.Time{})
				}
			})
		}},
	{"node_cpu_usage_seconds_total", "Cumulative CPU time the node used, in core-seconds.", "counter",
		func(s *statsapi.Summary, emit func([]string, float64, time.Time)) {
			if c := s.Node.CPU; c != nil && c.UsageCoreNanoSeconds != nil {
				emit(nil, seconds(*c.UsageCoreNanoSeconds), c.Time.Time)
			}
		}},
	{"node_memory_working_set_bytes", "The node's memory working set, in bytes.", "gauge",
		func(s *statsapi.Summary, emit func([]string, float64, time.Time)) {
			if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
				emit(nil, float64(*m.WorkingSetBytes), m.Time.Time)
			}
		}},
	{"pod_cpu_usage_seconds_total", "Cumulative CPU time the pod used, in core-seconds.", "counter",
		func(s *statsapi.Summary, emit func([]string, float64, time.Time)) {
			eachPod(s, func(p *statsapi.PodStats, l []string) {
				if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
					emit(l, seconds(*p.CPU.UsageCoreNanoSeconds), p.CPU.Time.Time)
				}
			})
		}},
	{"pod_memory_working_set_bytes", "The pod's memory working set, in bytes.", "gauge",
		func(s *statsapi.Summary, emit func([]string, float64, time.Time)) {
			eachPod(s, func(p *statsapi.PodStats, l []string) {
				if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
					emit(l, float64(*p.Memory.WorkingSetBytes), p.Memory.Time.Time)
				}
			})
		}},
}

var (
	containerLabels = []string{"container", "namespace", "pod"}
	podLabels       = []string{"namespace", "pod"}
)

func seconds(ns uint64) float64 { return float64(ns) / float64(time.Second) }

func eachContainer(s *statsapi.Summary, fn func(*statsapi.PodStats, *statsapi.ContainerStats, []string)) {
	l := make([]string, 3)
	for i := range s.Pods {
		p := &s.Pods[i]
		for j := range p.Containers {
			c := &p.Containers[j]
			l[0], l[1], l[2] = c.Name, p.PodRef.Namespace, p.PodRef.Name
			fn(p, c, l)
		}
	}
}

func eachPod(s *statsapi.Summary, fn func(*statsapi.PodStats, []string)) {
	l := make([]string, 2)
	for i := range s.Pods {
		p := &s.Pods[i]
		l[0], l[1] = p.PodRef.Namespace, p.PodRef.Name
		fn(p, l)
	}
}

// metricsResource writes the last usage sample as kubelet's resource
// metrics, in the Prometheus text format, built from the sample at each
// request so that gone containers leave no series behind. CPU and memory
// series carry the time their figure was read, as kubelet's do
// (metrics-server takes it for its rates); container_start_time_seconds and
// resource_scrape_error carry none. resource_scrape_error is 1 while there
// is no sample, or the last one is incomplete.
func (h *Handler) metricsResource(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	var s *statsapi.Summary
	failed := 1
	if h.opts.Stats != nil {
		if snap := h.opts.Stats.Latest(); snap != nil && snap.Summary != nil {
			s = snap.Summary
			if snap.Err == nil {
				failed = 0
			}
		}
	}
	buf := make([]byte, 0, 4096+len(summaryPods(s))*2048)
	for _, f := range families {
		if s == nil {
			break
		}
		header := false
		f.each(s, func(labels []string, v float64, t time.Time) {
			if !header {
				buf = appendHeader(buf, f.name, f.help, f.typ)
				header = true
			}
			names := containerLabels
			if len(labels) == 2 {
				names = podLabels
			}
			buf = appendSeries(buf, f.name, names, labels, v, t)
		})
	}
	buf = appendHeader(buf, "resource_scrape_error", "1 if the last usage sample is missing or incomplete, 0 otherwise.", "gauge")
	buf = append(buf, "resource_scrape_error "...)
	buf = strconv.AppendInt(buf, int64(failed), 10)
	buf = append(buf, '\n')
	w.Header().Set("Content-Type", metricsContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(buf)
}

func summaryPods(s *statsapi.Summary) []statsapi.PodStats {
	if s == nil {
		return nil
	}
	return s.Pods
}

func appendHeader(buf []byte, name, help, typ string) []byte {
	buf = append(buf, "# HELP "...)
	buf = append(buf, name...)
	buf = append(buf, ' ')
	buf = append(buf, help...)
	buf = append(buf, "\n# TYPE "...)
	buf = append(buf, name...)
	buf = append(buf, ' ')
	buf = append(buf, typ...)
	return append(buf, '\n')
}

// appendSeries writes one sample line: name{l1="v1",...} value [ms].
func appendSeries(buf []byte, name string, names, values []string, v float64, t time.Time) []byte {
	buf = append(buf, name...)
	if len(values) > 0 {
		buf = append(buf, '{')
		for i, n := range names {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, n...)
			buf = append(buf, `="`...)
			buf = appendLabelValue(buf, values[i])
			buf = append(buf, '"')
		}
		buf = append(buf, '}')
	}
	buf = append(buf, ' ')
	buf = appendFloat(buf, v)
	if !t.IsZero() {
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, t.UnixMilli(), 10)
	}
	return append(buf, '\n')
}

// appendLabelValue escapes a label value as the text format wants:
// backslash, double quote and newline.
func appendLabelValue(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			buf = append(buf, `\\`...)
		case '"':
			buf = append(buf, `\"`...)
		case '\n':
			buf = append(buf, `\n`...)
		default:
			buf = append(buf, c)
		}
	}
	return buf
}

func appendFloat(buf []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(buf, "NaN"...)
	case math.IsInf(v, 1):
		return append(buf, "+Inf"...)
	case math.IsInf(v, -1):
		return append(buf, "-Inf"...)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}
