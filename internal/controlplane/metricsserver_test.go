package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/controlplane"
)

// metricsServerObjects lists which of the objects StartMetricsServer
// creates exist.
func metricsServerObjects(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) []string {
	t.Helper()
	c := cp.AdminClient()
	ns, name := controlplane.MetricsServerNamespace, controlplane.MetricsServerName
	checks := map[string]error{}
	_, checks["Service"] = c.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	_, checks["EndpointSlice"] = c.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
	_, checks["ServiceAccount"] = c.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	_, checks["ClusterRole"] = c.RbacV1().ClusterRoles().Get(ctx, "nodekit:"+name, metav1.GetOptions{})
	_, checks["APIService"] = c.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/" + controlplane.MetricsAPIService).DoRaw(ctx)
	var found []string
	for what, err := range checks {
		switch {
		case err == nil:
			found = append(found, what)
		case !apierrors.IsNotFound(err):
			t.Fatalf("reading the %s: %v", what, err)
		}
	}
	return found
}

// metrics-server registers as v1beta1.metrics.k8s.io behind the
// aggregation layer: the API server routes the metrics API to it on
// 127.0.0.1 (no nodes, so an empty list), and Stop unregisters it, stops
// it and deletes what it created.
func TestMetricsServerRegistersAndStops(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cp.StartMetricsServer(ctx, controlplane.MetricsServerOptions{MetricResolution: 5 * time.Second}); err == nil ||
		!strings.Contains(err.Error(), "MetricResolution") {
		t.Fatalf("a 5s resolution: got %v, want an error naming MetricResolution", err)
	}
	if _, err := cp.StartMetricsServer(ctx, controlplane.MetricsServerOptions{KubeletCAFile: "/nonexistent/ca.crt"}); err == nil ||
		!strings.Contains(err.Error(), "KubeletCAFile") {
		t.Fatalf("a missing CA file: got %v, want an error naming KubeletCAFile", err)
	}

	ms := controlplane.NeedMetricsServer(t, cp, controlplane.MetricsServerOptions{})
	raw, err := cp.AdminClient().Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx)
	if err != nil {
		t.Fatalf("the metrics API through the API server: %v", err)
	}
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || list.Kind != "NodeMetricsList" || len(list.Items) != 0 {
		t.Fatalf("GET /apis/metrics.k8s.io/v1beta1/nodes: %s (%v); want an empty NodeMetricsList", raw, err)
	}
	if got := metricsServerObjects(ctx, t, cp); len(got) != 5 {
		t.Fatalf("objects after start: %v, want all five", got)
	}

	if err := ms.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := metricsServerObjects(ctx, t, cp); len(got) != 0 {
		t.Errorf("objects left after Stop: %v", got)
	}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ms.Port()), time.Second); err == nil {
		conn.Close()
		t.Errorf("metrics-server still listens on %d after Stop", ms.Port())
	}
	if err := ms.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
