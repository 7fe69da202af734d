package volume

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

// TestMeasureAPICost sets up one pod with a Secret, a ConfigMap and the
// projected token volume (token, kube-root-ca.crt, namespace) as
// system:node:<name> on the real API server, then keeps the Manager
// running, idle, for NODEKIT_MEASURE_WINDOW (default 12m, which covers at
// least one re-established watch: client-go asks for 5–10 min watches) and
// reports requests and bytes by verb and resource: at set-up and over the
// window. Run with NODEKIT_MEASURE=1; the figures are in BENCHMARKS.md.
func TestMeasureAPICost(t *testing.T) {
	if os.Getenv("NODEKIT_MEASURE") != "1" {
		t.Skip("set NODEKIT_MEASURE=1 to measure")
	}
	window := 12 * time.Minute
	if w := os.Getenv("NODEKIT_MEASURE_WINDOW"); w != "" {
		var err error
		if window, err = time.ParseDuration(w); err != nil {
			t.Fatal(err)
		}
	}
	n := newAPINode(t, "volume-measure")
	apiObjects(t, n.admin, "default", "measure")
	ctx := context.Background()
	pod, err := n.admin.CoreV1().Pods("default").Create(ctx, apiPod("measure", n.name, "measure"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	defer func() {
		_ = n.admin.CoreV1().Pods("default").Delete(ctx, "measure", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()
	snap := leakcheck.Take()
	m, err := New(withAPI(Options{}, n.node.CoreV1()))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	dir := filepath.Join(t.TempDir(), string(pod.UID))
	defer func() { _ = unmountAll(filepath.Dir(dir)) }()

	r0, q0, s0, c0 := n.count.snapshot()
	if err := m.SetUpPod(ctx, pod, dir); err != nil {
		t.Fatal(err)
	}
	r1, q1, s1, c1 := n.count.snapshot()
	t.Logf("set-up: %d requests, %d request bytes, %d response bytes: %s", r1-r0, q1-q0, s1-s0, diff(c1, c0))
	start := time.Now()
	timer := time.NewTimer(window)
	<-timer.C
	r2, q2, s2, c2 := n.count.snapshot()
	t.Logf("idle %v: %d requests, %d request bytes, %d response bytes: %s", time.Since(start).Round(time.Second), r2-r1, q2-q1, s2-s1, diff(c2, c1))
	if err := m.TearDownPod(ctx, pod, dir); err != nil {
		t.Error(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	n.closeIdle()
	snap.Verify(t)
}

func diff(now, before map[string]int) string {
	var keys []string
	for k, v := range now {
		if v-before[k] != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		out += k + "=" + itoa(now[k]-before[k]) + " "
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
