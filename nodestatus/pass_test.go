package nodestatus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A custom setter sees the pass's time, which under a fake clock is the fake
// time: from the list's clock in SetStatus, or as given to Run.
func TestCustomSetterSeesPassTime(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{
		Host:    nodestatustest.NewHost(nodestatustest.Facts("node-a")),
		Runtime: nodestatustest.NewRuntime(),
		Clock:   clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen []metav1.Time
	custom := nodestatus.StatusSetterFunc(func(ctx context.Context, node *corev1.Node) error {
		now := nodestatus.Now(ctx)
		seen = append(seen, now)
		nodestatus.SetCondition(node, corev1.NodeCondition{Type: "FanFailure", Status: corev1.ConditionFalse, Reason: "FansSpinning"}, now)
		return nil
	})
	setters, err = setters.InsertBefore(nodestatus.SetterReady, nodestatus.Named{Name: "Fan", StatusSetter: custom})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if err := setters.SetStatus(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Hour)
	if err := setters.Run(context.Background(), node, t1); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || !seen[0].Time.Equal(t0) || !seen[1].Time.Equal(t1) {
		t.Fatalf("the custom setter saw %v, want %v then %v", seen, t0, t1)
	}
	for _, c := range node.Status.Conditions {
		if !c.LastHeartbeatTime.Time.Equal(t1) {
			t.Errorf("condition %s: heartbeat %v, want the pass's time %v", c.Type, c.LastHeartbeatTime, t1)
		}
	}
}

// The runtime is told the node's pod CIDRs once per change, and again after
// a failed call, as kubelet does.
func TestPodCIDRToRuntime(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{
		Host:    nodestatustest.NewHost(nodestatustest.Facts("node-a")),
		Runtime: rt,
		Clock:   clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if setters[0].Name != nodestatus.SetterPodCIDR {
		t.Fatalf("first setter %q, want %q", setters[0].Name, nodestatus.SetterPodCIDR)
	}
	calls := func() int { return rt.CallCount("UpdateRuntimeConfig") }
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	pass := func() error { return setters.SetStatus(ctx, node) }

	_ = pass()
	if calls() != 0 {
		t.Fatalf("%d UpdateRuntimeConfig calls without a pod CIDR, want none", calls())
	}
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24", "fd00:1::/64"}
	_ = pass()
	_ = pass()
	if got := rt.RuntimeConfig().GetNetworkConfig().GetPodCidr(); got != "10.244.1.0/24,fd00:1::/64" || calls() != 1 {
		t.Fatalf("pod CIDR %q after %d calls, want 10.244.1.0/24,fd00:1::/64 after 1", got, calls())
	}
	node.Spec.PodCIDRs = []string{"10.244.2.0/24"}
	fail := runtimetest.Errors(errors.New("cni config template missing"))
	rt.SetHooks(runtimetest.Hooks{UpdateRuntimeConfig: func(context.Context, *runtimeapi.RuntimeConfig) error { return fail() }})
	if err := pass(); err == nil {
		t.Fatal("a failed UpdateRuntimeConfig is not reported")
	}
	_ = pass()
	if got := rt.RuntimeConfig().GetNetworkConfig().GetPodCidr(); got != "10.244.2.0/24" || calls() != 3 {
		t.Fatalf("pod CIDR %q after %d calls, want 10.244.2.0/24 after 3 (one failed, one retried)", got, calls())
	}
}
