package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// TestMeasureFootprint prints the agent's figures on the real containerd and
// the test control plane. It asserts nothing about them and runs only when
// NODEKIT_MEASURE=1 (hack/measure-agent.sh sets it):
//
//   - time from process start to Node Ready, seen through a watch, over
//     MEASURE_READY_RUNS (5) fresh nodes;
//   - VmRSS after MEASURE_IDLE (2m) idle;
//   - CPU (utime+stime) over the following MEASURE_WINDOW (5m) idle;
//   - API writes and request bytes over that window, from the agent's own
//     counters, extrapolated to an hour.
//
// The agent runs with kubelet's lease timing (40s duration, renewed every 10s)
// and default status frequencies.
func TestMeasureFootprint(t *testing.T) {
	if os.Getenv("NODEKIT_MEASURE") != "1" {
		t.Skip("set NODEKIT_MEASURE=1 (hack/measure-agent.sh) to measure the agent")
	}
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	idle, err := testenv.EnvDuration("MEASURE_IDLE", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	window, err := testenv.EnvDuration("MEASURE_WINDOW", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	runs := 5
	if s := os.Getenv("MEASURE_READY_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), idle+window+5*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	admin := cp.AdminClient()
	report := func(format string, args ...any) { fmt.Printf("MEASURE "+format+"\n", args...) }
	report("load average at start: %s", testenv.LoadAvg())

	var readies []time.Duration
	for i := range runs {
		name := fmt.Sprintf("measure-ready-%d", i)
		api, _ := nodeAPIArgs(t) // served, as kubelet serves its port
		p := startAgent(t, name, append(append(api, sharedDiskArgs[:]...), "--container-runtime-endpoint="+c.Endpoint, "-v=0")...)
		waitNode(ctx, t, admin, name, p.started, 10*time.Second, func(n *corev1.Node) bool {
			return condition(n, corev1.NodeReady) == corev1.ConditionTrue
		})
		readies = append(readies, time.Since(p.started))
		p.stop(t)
	}
	report("start to Node Ready (new node, watch from the admin client), %d runs: %v; median %v", runs, readies, testenv.Percentile(readies, 0.5))

	name := "measure-idle"
	api, _ := nodeAPIArgs(t)
	p := startAgent(t, name, append(append(api, sharedDiskArgs[:]...), "--container-runtime-endpoint="+c.Endpoint, "-v=0")...)
	waitNode(ctx, t, admin, name, p.started, 10*time.Second, func(n *corev1.Node) bool {
		return condition(n, corev1.NodeReady) == corev1.ConditionTrue
	})
	pid := p.cmd.Process.Pid
	waitFor(ctx, idle)
	rss := procStatus(t, pid)
	report("after %v idle: VmRSS %s (RssAnon %s, RssFile %s)", idle, rss["VmRSS"], rss["RssAnon"], rss["RssFile"])

	cpu0, m0, t0 := procCPUTicks(t, pid), p.get(t, "/metrics"), time.Now()
	waitFor(ctx, window)
	cpu1, m1, t1 := procCPUTicks(t, pid), p.get(t, "/metrics"), time.Now()
	elapsed := t1.Sub(t0)
	// Linux reports utime and stime in clock ticks of 1/100 s (USER_HZ).
	cpuSeconds := float64(cpu1-cpu0) / 100
	report("CPU over %v idle: %.2f s = %.3f%% of a core", elapsed.Round(time.Second), cpuSeconds, 100*cpuSeconds/elapsed.Seconds())
	perHour := float64(time.Hour) / float64(elapsed)
	w0, b0, detail0 := apiWrites(m0)
	w1, b1, detail1 := apiWrites(m1)
	report("API writes over %v: %.0f requests, %.0f request bytes -> per hour: %.0f writes, %.1f KiB",
		elapsed.Round(time.Second), w1-w0, b1-b0, (w1-w0)*perHour, (b1-b0)*perHour/1024)
	for k, v := range detail1 {
		report("  %s: %.0f in the window (%.0f since start)", k, v-detail0[k], v)
	}
	rss = procStatus(t, pid)
	report("at the end: VmRSS %s (RssAnon %s, RssFile %s)", rss["VmRSS"], rss["RssAnon"], rss["RssFile"])
	report("go heap in use at the end: %.1f MiB", metricValue(m1, "go_memstats_heap_inuse_bytes")/(1<<20))
	report("load average at the end: %s", testenv.LoadAvg())
	p.stop(t)
}

// waitFor waits d or until ctx ends.
func waitFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func procStatus(t *testing.T, pid int) map[string]string {
	st, err := testenv.ProcStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// procCPUTicks returns utime+stime of pid, in clock ticks.
func procCPUTicks(t *testing.T, pid int) int64 {
	ticks, err := testenv.ProcCPUTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	return ticks
}

// apiWrites sums the agent's POST, PUT and PATCH requests and their request
// bytes from its /metrics, with the per-(verb, resource) counts.
func apiWrites(exposition string) (requests, bytes float64, detail map[string]float64) {
	detail = map[string]float64{}
	for _, line := range strings.Split(exposition, "\n") {
		for _, m := range []string{nodekit.MetricAPIRequests, nodekit.MetricAPIRequestBytes} {
			rest, ok := strings.CutPrefix(line, m+"{")
			if !ok {
				continue
			}
			labels, val, _ := strings.Cut(rest, "} ")
			verb := labelValue(labels, "verb")
			if verb != "POST" && verb != "PUT" && verb != "PATCH" {
				continue
			}
			v, _ := strconv.ParseFloat(val, 64)
			key := verb + " " + labelValue(labels, "resource")
			if m == nodekit.MetricAPIRequests {
				requests += v
				detail[key+" requests (code "+labelValue(labels, "code")+")"] += v
			} else {
				bytes += v
				detail[key+" bytes"] += v
			}
		}
	}
	return requests, bytes, detail
}

func labelValue(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
