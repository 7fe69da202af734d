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
	"github.com/nodekit/nodekit/internal/testenv"
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

	c0 := n.count.Count()
	if err := m.SetUpPod(ctx, pod, dir); err != nil {
		t.Fatal(err)
	}
	c1 := n.count.Count()
	d := c1.Sub(c0)
	t.Logf("set-up: %d requests, %d request bytes, %d response bytes: %s", d.Requests, d.RequestBytes, d.ResponseBytes, byCall(d))
	start := time.Now()
	timer := time.NewTimer(window)
	<-timer.C
	d = n.count.Count().Sub(c1)
	t.Logf("idle %v: %d requests, %d request bytes, %d response bytes: %s", time.Since(start).Round(time.Second), d.Requests, d.RequestBytes, d.ResponseBytes, byCall(d))
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

// byCall lists the requests of d by call, "GET secrets=1 WATCH secrets=2 ".
func byCall(d testenv.APICount) string {
	var keys []string
	for k, v := range d.ByCall {
		if v.Requests != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		out += k + "=" + strconv.FormatInt(d.ByCall[k].Requests, 10) + " "
	}
	return out
}
