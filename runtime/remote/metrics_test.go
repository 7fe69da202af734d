package remote_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestOperationMetrics counts and times each call under kubelet's metric
// names and operation types, failed calls included; two clients on one
// registerer share the metrics (a reconnecting Conn dials again); a
// registerer that holds another collector under the name is an error that
// names the option.
func TestOperationMetrics(t *testing.T) {
	_, ep := fakeServer(t)
	reg := prometheus.NewRegistry()
	c := dial(t, remote.Options{Endpoint: ep, Registerer: reg})
	c2 := dial(t, remote.Options{Endpoint: ep, Registerer: reg})
	ctx := context.Background()
	if _, err := c.ListPodSandbox(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.ListPodSandbox(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ContainerStatus(ctx, "no-such-container", false); err == nil {
		t.Fatal("ContainerStatus of a container that does not exist succeeded")
	}
	if err := c.UpdateContainerResources(ctx, "no-such-container", &runtimeapi.ContainerResources{}); err == nil {
		t.Fatal("UpdateContainerResources of a container that does not exist succeeded")
	}
	want := `
# HELP kubelet_runtime_operations_total Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="container_status"} 1
kubelet_runtime_operations_total{operation_type="image_status"} 1
kubelet_runtime_operations_total{operation_type="list_podsandbox"} 2
kubelet_runtime_operations_total{operation_type="update_container"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_runtime_operations_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "kubelet_runtime_operations_duration_seconds"); n != 4 {
		t.Errorf("duration series = %d, want 4 (one per operation type)", n)
	}

	bad := prometheus.NewRegistry()
	bad.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubelet_runtime_operations_total", Help: "Another."}))
	if _, err := remote.Dial(ctx, remote.Options{Endpoint: ep, Registerer: bad}); err == nil || !strings.Contains(err.Error(), "Options.Registerer") {
		t.Errorf("Dial with a clashing registerer = %v; want an error naming Options.Registerer", err)
	}
}
