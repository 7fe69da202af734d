package sidebyside

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// row is one line of the table: a figure of each node, the same unit.
type row struct {
	what   string
	unit   string
	digits int
	get    func(*result) float64
}

func secs(d time.Duration) float64 { return d.Seconds() }

// table renders the results as Markdown, one column per kind and the
// ratio nodekit/kubelet when both ran.
func (b *bench) table(kinds []string, res map[string]*result) string {
	n := b.pods
	rows := []row{
		{fmt.Sprintf("start → Node Ready (median of %d)", b.readyRuns), "s", 3, func(r *result) float64 { return secs(r.ready) }},
		{fmt.Sprintf("VmRSS idle, after %v", b.idle), "MiB", 1, func(r *result) float64 { return float64(r.rssIdle) / (1 << 20) }},
		{fmt.Sprintf("VmRSS with %d probed pods, after %v", n, b.window), "MiB", 1, func(r *result) float64 { return float64(r.rssPods) / (1 << 20) }},
		{fmt.Sprintf("CPU idle, over %v", b.window), "% of a core", 3, func(r *result) float64 { return r.cpuIdle }},
		{fmt.Sprintf("CPU idle, scraped by metrics-server every %v, over %v", controlplane.DefaultMetricResolution, b.window), "% of a core", 3, func(r *result) float64 { return r.cpuScraped }},
		{fmt.Sprintf("CPU with %d probed pods, over %v", n, b.window), "% of a core", 3, func(r *result) float64 { return r.cpuPods }},
		{"API requests per idle hour", "requests", 0, func(r *result) float64 { return r.reqHour }},
		{"API bytes sent per idle hour", "KiB", 1, func(r *result) float64 { return r.sentHour / 1024 }},
		{"API bytes received per idle hour", "KiB", 1, func(r *result) float64 { return r.recvHour / 1024 }},
		{"API requests per pod lifecycle", "requests", 1, func(r *result) float64 { return r.reqPod }},
		{"API bytes sent per pod lifecycle", "KiB", 1, func(r *result) float64 { return r.sentPod / 1024 }},
		{"API bytes received per pod lifecycle", "KiB", 1, func(r *result) float64 { return r.recvPod / 1024 }},
		{fmt.Sprintf("start latency, %d pods one at a time, p50", n), "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.seq, 0.5)) }},
		{fmt.Sprintf("start latency, %d pods one at a time, p99", n), "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.seq, 0.99)) }},
		{fmt.Sprintf("start latency, %d pods at once, p50", n), "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.par, 0.5)) }},
		{fmt.Sprintf("start latency, %d pods at once, p99", n), "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.par, 0.99)) }},
		{"pod deleted (grace 30, exits on TERM) → gone from the API, p50", "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.seqGone, 0.5)) }},
		{"pod deleted (grace 30, exits on TERM) → gone from the API, p99", "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.seqGone, 0.99)) }},
		{fmt.Sprintf("%d pods deleted with grace 0 → no sandbox ready", n), "s", 3, func(r *result) float64 { return secs(r.stopped) }},
		{fmt.Sprintf("%d pods deleted with grace 0 → no sandbox in CRI", n), "s", 3, func(r *result) float64 { return secs(r.cleanup) }},
		{fmt.Sprintf("%d pods with a ConfigMap, a Secret and a token: requests per pod to Running", b.dataPods), "requests", 1, func(r *result) float64 { return r.data.setUpReq }},
		{"same: bytes sent per pod to Running", "KiB", 2, func(r *result) float64 { return r.data.setUpSent / 1024 }},
		{fmt.Sprintf("same: requests per pod per hour while they run (over %v)", b.window), "requests", 1, func(r *result) float64 { return r.data.hourReq }},
		{"static pod: file written → mirror pod in the API, p50", "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.mirror, 0.5)) }},
		{"static pod: file written → mirror pod Running, p50", "s", 3, func(r *result) float64 { return secs(testenv.Percentile(r.staticRunning, 0.5)) }},
	}
	var sb strings.Builder
	both := len(kinds) == 2
	sb.WriteString("\n| figure | unit |")
	for _, k := range kinds {
		sb.WriteString(" " + k + " |")
	}
	if both {
		sb.WriteString(" nodekit/kubelet |")
	}
	sb.WriteString("\n|---|---|")
	for range kinds {
		sb.WriteString("---:|")
	}
	if both {
		sb.WriteString("---:|")
	}
	sb.WriteString("\n")
	for _, rw := range rows {
		fmt.Fprintf(&sb, "| %s | %s |", rw.what, rw.unit)
		var vals []float64
		for _, k := range kinds {
			v := rw.get(res[k])
			vals = append(vals, v)
			if v < 0 { // not measured
				sb.WriteString(" n/a |")
				continue
			}
			fmt.Fprintf(&sb, " %.*f |", rw.digits, v)
		}
		if both {
			if vals[0] > 0 && vals[1] >= 0 {
				fmt.Fprintf(&sb, " %.2f |", vals[1]/vals[0])
			} else {
				sb.WriteString(" – |")
			}
		}
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "\nBENCH machine: %d CPUs (%s/%s); %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	for _, k := range kinds {
		r := res[k]
		fmt.Fprintf(&sb, "BENCH %s: load average %s before, %s after; start to Ready %v\n", k, r.loadBefore, r.loadAfter, roundAll(r.readyAll))
		fmt.Fprintf(&sb, "BENCH %s: CPU of waited-for children: %.3f%% idle, %.3f%% with pods\n", k, r.idleChildCPU, r.podsChildCPU)
		fmt.Fprintf(&sb, "BENCH %s: idle window %v, scraped window %v, pods window %v, one-at-a-time span %v\n", k,
			r.idleWindow.Round(time.Second), r.scrapedWindow.Round(time.Second), r.podsWindow.Round(time.Second), r.lifecycleSpan.Round(time.Second))
		for _, note := range r.notes {
			fmt.Fprintf(&sb, "BENCH %s: note: %s\n", k, note)
		}
	}
	return sb.String()
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
