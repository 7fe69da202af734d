package sidebyside

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// row is one line of the table: a figure of each node, the same unit, and
// the floor under it where it has one.
type row struct {
	what   string
	unit   string
	digits int
	get    func(*result) float64
	floor  func(*floors) float64 // nil: no floor
}

func secs(d time.Duration) float64 { return d.Seconds() }

// table renders the results as Markdown, one column per kind, the ratio
// nodekit/kubelet when both ran, the floor and the ratio nodekit/floor.
func (b *bench) table(kinds []string, res map[string]*result) string {
	n := b.pods
	p50 := func(d []time.Duration) float64 { return secs(testenv.Percentile(d, 0.5)) }
	p99 := func(d []time.Duration) float64 { return secs(testenv.Percentile(d, 0.99)) }
	rows := []row{
		{fmt.Sprintf("start → Node Ready (median of %d)", b.readyRuns), "s", 3, func(r *result) float64 { return secs(r.ready) }, nil},
		{fmt.Sprintf("VmRSS idle, after %v", b.idle), "MiB", 1, func(r *result) float64 { return float64(r.rssIdle) / (1 << 20) }, nil},
		{fmt.Sprintf("VmRSS with %d probed pods, after %v", n, b.window), "MiB", 1, func(r *result) float64 { return float64(r.rssPods) / (1 << 20) }, nil},
		{fmt.Sprintf("CPU idle, over %v", b.window), "% of a core", 3, func(r *result) float64 { return r.cpuIdle }, nil},
		{fmt.Sprintf("CPU idle, scraped by metrics-server every %v, over %v", controlplane.DefaultMetricResolution, b.window), "% of a core", 3, func(r *result) float64 { return r.cpuScraped }, nil},
		{fmt.Sprintf("CPU with %d probed pods, over %v", n, b.window), "% of a core", 3, func(r *result) float64 { return r.cpuPods }, nil},
		{"API requests per idle hour", "requests", 0, func(r *result) float64 { return r.reqHour }, func(f *floors) float64 { return f.reqHour }},
		{"API bytes sent per idle hour", "KiB", 1, func(r *result) float64 { return r.sentHour / 1024 }, nil},
		{"API bytes received per idle hour", "KiB", 1, func(r *result) float64 { return r.recvHour / 1024 }, func(f *floors) float64 { return f.recvHour / 1024 }},
		{"API requests per pod lifecycle", "requests", 1, func(r *result) float64 { return r.reqPod }, nil},
		{"API bytes sent per pod lifecycle", "KiB", 1, func(r *result) float64 { return r.sentPod / 1024 }, nil},
		{"API bytes received per pod lifecycle", "KiB", 1, func(r *result) float64 { return r.recvPod / 1024 }, nil},
		{fmt.Sprintf("start latency, %d pods one at a time, p50", n), "s", 3, func(r *result) float64 { return p50(r.seq) }, func(f *floors) float64 { return p50(f.seq) }},
		{fmt.Sprintf("start latency, %d pods one at a time, p99", n), "s", 3, func(r *result) float64 { return p99(r.seq) }, func(f *floors) float64 { return p99(f.seq) }},
		{fmt.Sprintf("start latency, %d pods at once, p50", n), "s", 3, func(r *result) float64 { return p50(r.par) }, func(f *floors) float64 { return p50(f.par) }},
		{fmt.Sprintf("start latency, %d pods at once, p99", n), "s", 3, func(r *result) float64 { return p99(r.par) }, func(f *floors) float64 { return p99(f.par) }},
		{"pod deleted (grace 30, exits on TERM) → gone from the API, p50", "s", 3, func(r *result) float64 { return p50(r.seqGone) }, nil},
		{"pod deleted (grace 30, exits on TERM) → gone from the API, p99", "s", 3, func(r *result) float64 { return p99(r.seqGone) }, nil},
		{fmt.Sprintf("%d pods deleted with grace 0 → no sandbox ready", n), "s", 3, func(r *result) float64 { return secs(r.stopped) }, func(f *floors) float64 { return secs(f.parStopped) }},
		{fmt.Sprintf("%d pods deleted with grace 0 → no sandbox in CRI", n), "s", 3, func(r *result) float64 { return secs(r.cleanup) }, func(f *floors) float64 { return secs(f.parGone) }},
		{fmt.Sprintf("%d pods with a ConfigMap, a Secret and a token: requests per pod to Running", b.dataPods), "requests", 1, func(r *result) float64 { return r.data.setUpReq }, nil},
		{"same: bytes sent per pod to Running", "KiB", 2, func(r *result) float64 { return r.data.setUpSent / 1024 }, nil},
		{fmt.Sprintf("same: requests per pod per hour while they run (over %v)", b.window), "requests", 1, func(r *result) float64 { return r.data.hourReq }, nil},
		{"static pod: file written → mirror pod in the API, p50", "s", 3, func(r *result) float64 { return p50(r.mirror) }, func(f *floors) float64 { return p50(f.mirror) }},
		{"static pod: file written → mirror pod Running, p50", "s", 3, func(r *result) float64 { return p50(r.staticRunning) }, nil},
	}
	for _, size := range b.densities {
		rows = append(rows, densityRows(size, b.densityWindow, b.maxPods)...)
	}
	var sb strings.Builder
	both := len(kinds) == 2
	withFloor := b.floor != nil
	withAgent := slices.Contains(kinds, nodekit)
	sb.WriteString("\n| figure | unit |")
	for _, k := range kinds {
		sb.WriteString(" " + k + " |")
	}
	if both {
		sb.WriteString(" nodekit/kubelet |")
	}
	if withFloor {
		sb.WriteString(" floor |")
		if withAgent {
			sb.WriteString(" nodekit/floor |")
		}
	}
	sb.WriteString("\n|---|---|")
	for range kinds {
		sb.WriteString("---:|")
	}
	if both {
		sb.WriteString("---:|")
	}
	if withFloor {
		sb.WriteString("---:|")
		if withAgent {
			sb.WriteString("---:|")
		}
	}
	sb.WriteString("\n")
	for _, rw := range rows {
		fmt.Fprintf(&sb, "| %s | %s |", rw.what, rw.unit)
		vals := map[string]float64{}
		for _, k := range kinds {
			v := rw.get(res[k])
			vals[k] = v
			if v < 0 { // not measured
				sb.WriteString(" n/a |")
				continue
			}
			fmt.Fprintf(&sb, " %.*f |", rw.digits, v)
		}
		if both {
			sb.WriteString(ratio(vals[nodekit], vals[kubelet]))
		}
		if withFloor {
			if rw.floor == nil {
				sb.WriteString(" |")
				if withAgent {
					sb.WriteString(" |")
				}
			} else {
				f := rw.floor(b.floor)
				if f < 0 {
					sb.WriteString(" n/a |")
				} else {
					fmt.Fprintf(&sb, " %.*f |", rw.digits, f)
				}
				if withAgent {
					sb.WriteString(ratio(vals[nodekit], f))
				}
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
		for _, size := range b.densities {
			if d := r.density[size]; d != nil {
				fmt.Fprintf(&sb, "BENCH %s: density %d: window %v; deleted with grace 0 → no sandbox ready %v\n", k, size,
					d.window.Round(time.Second), d.stopped.Round(time.Millisecond))
			}
		}
		for _, note := range r.notes {
			fmt.Fprintf(&sb, "BENCH %s: note: %s\n", k, note)
		}
	}
	return sb.String()
}

// ratio is the cell of a/b: "–" when b is not positive or a was not
// measured.
func ratio(a, b float64) string {
	if b > 0 && a >= 0 {
		return fmt.Sprintf(" %.2f |", a/b)
	}
	return " – |"
}

// densityRows are the rows of one density size.
func densityRows(size int, window time.Duration, maxPods int) []row {
	total := size + densityMore
	d := func(get func(*densityFigures) float64) func(*result) float64 {
		return func(r *result) float64 {
			if f := r.density[size]; f != nil {
				return get(f)
			}
			return -1
		}
	}
	fl := func(get func(*densityFigures) float64) func(*floors) float64 {
		return func(f *floors) float64 {
			if d := f.density[size]; d != nil {
				return get(d)
			}
			return -1
		}
	}
	p := func(q float64, ds func(*densityFigures) []time.Duration) func(*densityFigures) float64 {
		return func(f *densityFigures) float64 { return secs(testenv.Percentile(ds(f), q)) }
	}
	ready := func(f *densityFigures) []time.Duration { return f.ready }
	more := func(f *densityFigures) []time.Duration { return f.more }
	allReady := func(f *densityFigures) float64 { return secs(f.allReady) }
	gone := func(f *densityFigures) float64 { return secs(f.gone) }
	pre := fmt.Sprintf("density %d (maxPods %d): ", size, maxPods)
	return []row{
		{pre + fmt.Sprintf("%d pods at once, half probed → all Running and Ready", size), "s", 3, d(allReady), fl(allReady)},
		{pre + "create → Running and Ready, p50", "s", 3, d(p(0.5, ready)), fl(p(0.5, ready))},
		{pre + "create → Running and Ready, p99", "s", 3, d(p(0.99, ready)), fl(p(0.99, ready))},
		{pre + fmt.Sprintf("CPU with %d pods, over %v", size, window), "% of a core", 3, d(func(f *densityFigures) float64 { return f.cpu }), nil},
		{pre + fmt.Sprintf("VmRSS with %d pods", size), "MiB", 1, d(func(f *densityFigures) float64 { return float64(f.rss) / (1 << 20) }), nil},
		{pre + fmt.Sprintf("start latency, %d more pods one at a time, p50", densityMore), "s", 3, d(p(0.5, more)), fl(p(0.5, more))},
		{pre + fmt.Sprintf("start latency, %d more pods one at a time, p99", densityMore), "s", 3, d(p(0.99, more)), fl(p(0.99, more))},
		{pre + fmt.Sprintf("%d pods deleted with grace 0 → no sandbox in CRI", total), "s", 3, d(gone), fl(gone)},
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
