package remote_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestOperationMetrics counts and times each call (by Options.Clock) under
// kubelet's metric names and operation types, each dial's Version and
// failed calls included; two clients on one
// registerer share the metrics (a reconnecting Conn dials again); a
// registerer that holds another collector under the name is an error that
// names the option.
func TestOperationMetrics(t *testing.T) {
	f, ep := fakeServer(t)
	// Each ListPodSandbox takes 2s and ImageStatus 0.5s of the clients'
	// clock, stepped by the runtime while it answers.
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	f.SetHooks(runtimetest.Hooks{
		ListPodSandbox: func(context.Context, *runtimeapi.PodSandboxFilter) error { clk.Step(2 * time.Second); return nil },
		ImageStatus:    func(context.Context, *runtimeapi.ImageSpec, bool) error { clk.Step(time.Second / 2); return nil },
	})
	reg := prometheus.NewRegistry()
	c := dial(t, remote.Options{Endpoint: ep, Registerer: reg, Clock: clk})
	c2 := dial(t, remote.Options{Endpoint: ep, Registerer: reg, Clock: clk})
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
kubelet_runtime_operations_total{operation_type="version"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_runtime_operations_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "kubelet_runtime_operations_duration_seconds"); n != 5 {
		t.Errorf("duration series = %d, want 5 (one per operation type)", n)
	}
	took := testenv.Histograms(t, reg, "kubelet_runtime_operations_duration_seconds", "operation_type")
	for op, want := range map[string]float64{"list_podsandbox": 4, "image_status": 0.5, "container_status": 0, "update_container": 0, "version": 0} {
		if took[op].Sum != want {
			t.Errorf("%s took %v s in all by the clients' clock, want %v", op, took[op].Sum, want)
		}
	}

	bad := prometheus.NewRegistry()
	bad.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubelet_runtime_operations_total", Help: "Another."}))
	if _, err := remote.Dial(ctx, remote.Options{Endpoint: ep, Registerer: bad}); err == nil || !strings.Contains(err.Error(), "Options.Registerer") {
		t.Errorf("Dial with a clashing registerer = %v; want an error naming Options.Registerer", err)
	}
}
