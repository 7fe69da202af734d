package sidebyside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// nodeMetrics is the part of a metrics.k8s.io/v1beta1 NodeMetrics the
// phase reads.
type nodeMetrics struct {
	Timestamp time.Time         `json:"timestamp"`
	Usage     map[string]string `json:"usage"`
}

// scraped measures the node's CPU over the window while the real
// metrics-server scrapes it every DefaultMetricResolution (15s), with no
// pods: metrics-server starts, the phase waits until the metrics API has
// the node (two scrapes), samples, waits the window, samples again,
// checks that the node's metrics are still fresh (the scrapes went on),
// and stops metrics-server. It returns the CPU in % of one core and the
// window, or -1 when metrics-server is not available (controlplane's
// ErrUnavailable) or the node's metrics were not fresh after the window.
func (b *bench) scraped(kind string, n *node) (cpu float64, window time.Duration) {
	t := b.t
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	// Unverified TLS to the nodes, for both alike: the kubelet's
	// self-signed certificate names only its host name, not the
	// InternalIP that metrics-server dials. Both still authenticate its
	// token (TokenReview) and authorize nodes/metrics (SubjectAccessReview).
	ms, err := b.cp.StartMetricsServer(ctx, controlplane.MetricsServerOptions{})
	if errors.Is(err, controlplane.ErrUnavailable) {
		// The row says n/a, and the notes why.
		report("%s: no metrics-server phase: %v", kind, err)
		return -1, 0
	}
	if err != nil {
		t.Fatalf("%s: starting metrics-server: %v", kind, err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if t.Failed() {
			t.Logf("metrics-server's log ends with:\n%s", ms.LogTail(4096))
		}
		if err := ms.Stop(); err != nil {
			t.Errorf("stopping metrics-server: %v", err)
		}
	}
	defer stop()
	var first nodeMetrics
	testenv.Eventually(t, 2*time.Minute, time.Second, kind+" node in the metrics API", func() bool {
		b.alive()
		m, ok := b.nodeMetrics(ctx, n.name)
		first = m
		return ok
	})
	report("%s: metrics-server: first node metrics %v", kind, first.Usage)
	s0 := b.scrapes(ctx, n.name)
	f0 := b.sample(n)
	b.pause(b.window)
	n.alive()
	f1 := b.sample(n)
	// The start-up context has run out over the window: the reads after
	// it get their own (with the start-up one they all failed, and the
	// row said n/a for every node).
	ctx, cancel = context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	s1 := b.scrapes(ctx, n.name)
	cpu, _ = cpuPercent(f0, f1)
	// The node's own count of /metrics/resource requests says whether
	// the scrapes went on: all but one of the window's.
	want := float64(f1.at.Sub(f0.at)/controlplane.DefaultMetricResolution) - 1
	scraped := s0 >= 0 && s1 >= 0 && s1-s0 >= want
	report("%s: metrics-server: %v scrapes of /metrics/resource in the window (kubelet_http_requests_total), want at least %v", kind, s1-s0, want)
	// A node is missing from the metrics API after a scrape that did not
	// give metrics-server a newer sample of it (kubelet's cAdvisor samples
	// on its own period), so one read is not enough: metrics-server must
	// have a fresh sample within three scrape periods.
	var last nodeMetrics
	fresh := func() bool {
		m, ok := b.nodeMetrics(ctx, n.name)
		last = m
		return ok && time.Since(m.Timestamp) <= 3*controlplane.DefaultMetricResolution
	}
	deadline := time.Now().Add(3 * controlplane.DefaultMetricResolution)
	for !fresh() {
		if time.Now().After(deadline) && scraped {
			// Not in the metrics API now, yet scraped all along: the
			// figure stands.
			report("%s: no fresh node metrics in the metrics API after the window (last %v at %v), though the node was scraped; metrics-server's log ends with:\n%s",
				kind, last.Usage, last.Timestamp, ms.LogTail(1024))
			stop()
			return cpu, f1.at.Sub(f0.at)
		}
		if time.Now().After(deadline) {
			// Without proof that the scrapes went on, the row says n/a
			// rather than a figure.
			report("%s: no figure for the scraped window: no fresh node metrics within %v after it (last %v at %v); metrics-server's log ends with:\n%s",
				kind, 3*controlplane.DefaultMetricResolution, last.Usage, last.Timestamp, ms.LogTail(1024))
			stop()
			return -1, 0
		}
		b.pause(time.Second)
	}
	report("%s: metrics-server: last node metrics %v at %v", kind, last.Usage, last.Timestamp.Format(time.RFC3339))
	stop()
	return cpu, f1.at.Sub(f0.at)
}

// nodeMetrics reads the node's metrics through the API server.
func (b *bench) nodeMetrics(ctx context.Context, name string) (nodeMetrics, bool) {
	var m nodeMetrics
	raw, err := b.admin.Discovery().RESTClient().Get().AbsPath(fmt.Sprintf("/apis/metrics.k8s.io/v1beta1/nodes/%s", name)).DoRaw(ctx)
	if err != nil || json.Unmarshal(raw, &m) != nil {
		return m, false
	}
	return m, m.Usage["cpu"] != "" && m.Usage["memory"] != ""
}

// scrapes reads the node's count of /metrics/resource requests,
// kubelet_http_requests_total{path="metrics/resource"} on its /metrics
// through the API server's node proxy, or -1 when it cannot.
func (b *bench) scrapes(ctx context.Context, name string) float64 {
	raw, err := b.admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", name, "proxy", "metrics").DoRaw(ctx)
	if err != nil {
		report("reading %s's /metrics through the API server: %v", name, err)
		return -1
	}
	total := 0.0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "kubelet_http_requests_total{") || !strings.Contains(line, `path="metrics/resource"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		total += v
	}
	return total
}
