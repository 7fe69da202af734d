package main

import (
	"time"

	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// Before registration (and standalone) pods are admitted against the node
// the agent would register: its labels and taints, and the capacity the
// MachineInfo setter computes, pods following --max-pods.
func TestAdmissionNodeBeforeRegistration(t *testing.T) {
	cfg := &config{maxPods: 7, nodeLabels: map[string]string{"zone": "north"},
		registerWithTaints: []corev1.Taint{{Key: "edge", Effect: corev1.TaintEffectNoExecute}}}
	rc := runtimetest.New(runtimetest.Options{})
	localNode := func(cfg *config) func() (*corev1.Node, error) {
		so := statusOptions(cfg, "n1", rc)
		so.Clock = clocktesting.NewFakeClock(t0)
		return nodekit.LocalNode(nodeTemplate(cfg, "n1"), so)
	}
	n := localNode(cfg)
	node, err := n()
	if err != nil {
		t.Fatal(err)
	}
	if node.Name != "n1" || node.Labels["zone"] != "north" || len(node.Spec.Taints) != 1 {
		t.Errorf("node %s labels %v taints %v", node.Name, node.Labels, node.Spec.Taints)
	}
	if q := node.Status.Allocatable[corev1.ResourcePods]; q.Value() != 7 {
		t.Errorf("allocatable pods %s, want 7", q.String())
	}
	if q := node.Status.Allocatable[corev1.ResourceCPU]; q.IsZero() {
		t.Error("no allocatable cpu")
	}
	// Computed once.
	if again, _ := n(); again != node {
		t.Error("the local node was computed again")
	}

	// --pods-per-core caps pods capacity at that many per core.
	cfg = &config{maxPods: 110, podsPerCore: 1}
	node, err = localNode(cfg)()
	if err != nil {
		t.Fatal(err)
	}
	cpus := node.Status.Capacity[corev1.ResourceCPU]
	if q := node.Status.Allocatable[corev1.ResourcePods]; q.Value() != cpus.Value() {
		t.Errorf("allocatable pods %s with 1 pod per core on %s cores", q.String(), cpus.String())
	}
}

// --pod-infra-container-image: pulled when the runtime lacks it, left
// alone when it has it.
func TestEnsurePauseImage(t *testing.T) {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{Images: map[string]uint64{}})
	cri.EnsureImage(ctx, rt, "registry.example/pause:3.10")
	if st, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "registry.example/pause:3.10"}, false); err != nil || st.GetImage() == nil {
		t.Fatalf("image not pulled: %v %v", st, err)
	}
	rt.ResetCalls()
	cri.EnsureImage(ctx, rt, "registry.example/pause:3.10")
	for _, c := range rt.Calls() {
		if c.Method == "PullImage" {
			t.Fatal("pulled an image the runtime has")
		}
	}
	// A failed pull is logged, not fatal; an empty flag asks nothing.
	fail := runtimetest.Errors(errors.New("no registry"))
	rt.SetHooks(runtimetest.Hooks{PullImage: func(context.Context, *runtimeapi.ImageSpec, *runtimeapi.AuthConfig, *runtimeapi.PodSandboxConfig) error {
		return fail()
	}})
	cri.EnsureImage(ctx, rt, "registry.example/other:1")
	rt.ResetCalls()
	cri.EnsureImage(ctx, rt, "")
	if n := len(rt.Calls()); n != 0 {
		t.Fatalf("%d runtime calls with no image", n)
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
