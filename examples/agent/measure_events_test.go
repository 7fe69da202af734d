package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// TestMeasureEventsCPU prints what container events save: the agent's CPU
// (utime+stime) with MEASURE_PODS (100) running host-network pods, over
// MEASURE_WINDOW (2m) after MEASURE_SETTLE (30s) once all are Running in
// the API, on containerd 1.x (no container events: the agent relists
// every 1s) and then on containerd 2 (events: a full relist every 5m and a
// runtime status check every 1s), with the containerds' own CPU over the
// same window, and the ratios. It asserts nothing about the figures and
// runs only when NODEKIT_MEASURE=1 (hack/measure-events.sh sets it).
func TestMeasureEventsCPU(t *testing.T) {
	if os.Getenv("NODEKIT_MEASURE") != "1" {
		t.Skip("set NODEKIT_MEASURE=1 (hack/measure-events.sh) to measure the agent on both containerds")
	}
	cp := controlplane.Need(t, cp)
	c1 := containerdtest.Need(t, ctrd)
	c2 := containerdtest.Need2(t, ctrd2)
	pods, err := testenv.EnvInt("MEASURE_PODS", 100)
	if err != nil || pods < 1 || pods > 110 {
		t.Fatalf("MEASURE_PODS: want 1 to 110 (the agent's --max-pods), got %d (%v)", pods, err)
	}
	settle, err := testenv.EnvDuration("MEASURE_SETTLE", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	window, err := testenv.EnvDuration("MEASURE_WINDOW", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	report := func(format string, args ...any) { fmt.Printf("MEASURE "+format+"\n", args...) }
	report("load average at start: %s", testenv.LoadAvg())
	type result struct {
		version          string
		agent, runtime   float64 // CPU seconds over the window
		elapsed, toReady time.Duration
	}
	var results []result
	for i, c := range []*containerdtest.Containerd{c1, c2} {
		var r result
		t.Run(fmt.Sprintf("containerd%d", c.Major), func(t *testing.T) {
			r.version = c.RuntimeVersion
			r.toReady, r.elapsed, r.agent, r.runtime = measureEventsOn(t, cp, c, fmt.Sprintf("measure-ev%d", i), pods, settle, window)
			report("containerd %s: %d pods Running in %v; over %v: agent %.2f s CPU, containerd %.2f s CPU; load average %s",
				r.version, pods, r.toReady.Round(time.Second), r.elapsed.Round(time.Second), r.agent, r.runtime, testenv.LoadAvg())
		})
		if t.Failed() {
			return
		}
		results = append(results, r)
	}
	pct := func(cpu float64, d time.Duration) float64 { return 100 * cpu / d.Seconds() }
	a, b := results[0], results[1]
	report("| %d host-network pods, %v window | containerd %s (relist 1s) | containerd %s (events, relist 5m) | ratio (2/1) |", pods, window, a.version, b.version)
	report("|---|---|---|---|")
	report("| agent CPU, %% of a core | %.2f | %.2f | %.2f |", pct(a.agent, a.elapsed), pct(b.agent, b.elapsed), pct(b.agent, b.elapsed)/pct(a.agent, a.elapsed))
	report("| containerd CPU, %% of a core | %.2f | %.2f | %.2f |", pct(a.runtime, a.elapsed), pct(b.runtime, b.elapsed), pct(b.runtime, b.elapsed)/pct(a.runtime, a.elapsed))
	report("load average at the end: %s", testenv.LoadAvg())
}

// measureEventsOn runs the agent on c as node with n API pods bound to it,
// measures, deletes them and waits until c runs nothing.
func measureEventsOn(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, node string, n int, settle, window time.Duration) (toReady, elapsed time.Duration, agentCPU, runtimeCPU float64) {
	ctx, cancel := context.WithTimeout(context.Background(), settle+window+15*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()
	p := startAgent(t, node, append(podArgs(t, c, t.TempDir()), "-v=0")...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	zero := int64(0)
	names := createPods(ctx, t, admin, c, node, node, n)
	deleteAll := func() {
		for _, name := range names {
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
	t.Cleanup(deleteAll)
	created := time.Now()
	testenv.Eventually(t, 10*time.Minute, time.Second, fmt.Sprintf("%d pods Running in the API", n), func() bool {
		list, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false
		}
		running := 0
		for _, pod := range list.Items {
			if pod.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n
	})
	toReady = time.Since(created)
	waitFor(ctx, settle)

	agent0, ctrd0, t0 := procCPUTicks(t, p.cmd.Process.Pid), procCPUTicks(t, c.Pid()), time.Now()
	waitFor(ctx, window)
	agent1, ctrd1, t1 := procCPUTicks(t, p.cmd.Process.Pid), procCPUTicks(t, c.Pid()), time.Now()
	elapsed = t1.Sub(t0)
	agentCPU = float64(agent1-agent0) / testenv.TicksPerSecond
	runtimeCPU = float64(ctrd1-ctrd0) / testenv.TicksPerSecond

	deleteAll()
	testenv.Eventually(t, 5*time.Minute, time.Second, "containerd empty after the pods were deleted", func() bool {
		return runtimeEmpty(rt)
	})
	p.stop(t)
	return toReady, elapsed, agentCPU, runtimeCPU
}
