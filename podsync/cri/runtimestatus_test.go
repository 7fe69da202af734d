package cri

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// The CRI syncer is a nodestatus.RuntimeStatusSource.
var _ nodestatus.RuntimeStatusSource = (*Syncer)(nil)

// The relist's Status call is what LatestRuntimeStatus returns, dated by
// the relist; a failed call is its error; nothing before the first relist.
// A ready runtime is asked every StatusPeriod (5s), not at every relist;
// one not ready, or whose last ask failed, at every relist.
func TestCRILatestRuntimeStatus(t *testing.T) {
	h := newHarness(t)
	if _, _, err := h.Syncer.LatestRuntimeStatus(); err == nil {
		t.Fatal("a status before any relist")
	}
	h.Steps(1)
	st, at, err := h.Syncer.LatestRuntimeStatus()
	if err != nil || !at.Equal(t0) || len(st.GetStatus().GetConditions()) != 2 {
		t.Fatalf("after a relist: %v at %v, %v", st, at, err)
	}
	statusCalls := func() int { return h.RT.CallCount("Status") }

	// Within StatusPeriod of a ready answer relists keep it.
	h.RT.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	h.RT.ResetCalls()
	for range 4 {
		h.Clock.Step(time.Second)
		h.Steps(1)
	}
	if _, at, err := h.Syncer.LatestRuntimeStatus(); err != nil || !at.Equal(t0) || statusCalls() != 0 {
		t.Fatalf("relists within 5s: status at %v, %v, %d Status calls", at, err, statusCalls())
	}
	h.Clock.Step(time.Second)
	h.Steps(1)
	st, at, err = h.Syncer.LatestRuntimeStatus()
	if err != nil || !at.Equal(t0.Add(5*time.Second)) || statusCalls() != 1 {
		t.Fatalf("relist at 5s: at %v, %v, %d Status calls", at, err, statusCalls())
	}
	// Not ready: every relist asks.
	h.Clock.Step(time.Second)
	h.Steps(1)
	if _, at, err := h.Syncer.LatestRuntimeStatus(); err != nil || !at.Equal(t0.Add(6*time.Second)) || statusCalls() != 2 {
		t.Fatalf("relist while the network is not ready: at %v, %v, %d Status calls", at, err, statusCalls())
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.Type == runtimeapi.NetworkReady && (c.Status || c.Reason != "NetworkPluginNotReady") {
			t.Fatalf("NetworkReady %+v", c)
		}
	}

	// Node status built on it says so, without asking the runtime itself.
	h.RT.ResetCalls()
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{Runtime: h.RT, RuntimeStatus: h.Syncer, Clock: h.Clock})
	if err != nil {
		t.Fatal(err)
	}
	i := setters.Index(nodestatus.SetterReady)
	node := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}}}
	if err := setters[i:i+1].Run(h.Ctx, node, h.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if c := node.Status.Conditions[0]; c.Status != "False" || c.Reason != "KubeletNotReady" ||
		c.Message != "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized" {
		t.Fatalf("Ready %s %q", c.Status, c.Message)
	}
	if h.RT.CallCount("Status") != 0 {
		t.Fatal("node status asked the runtime for its status")
	}

	// Ready again: asked at the next relist, then kept.
	h.RT.SetCondition(runtimeapi.NetworkReady, true, "", "")
	h.Clock.Step(time.Second)
	h.Steps(1)
	h.Clock.Step(time.Second)
	h.Steps(1)
	if _, at, err := h.Syncer.LatestRuntimeStatus(); err != nil || !at.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("ready again: at %v, %v", at, err)
	}

	// A failed ask is its error, and the next relist asks again.
	fail := runtimetest.Errors(errors.New("deadline exceeded"))
	h.RT.SetHooks(runtimetest.Hooks{Status: func(context.Context, bool) error { return fail() }})
	h.Clock.Step(4 * time.Second)
	h.Steps(1)
	if _, at, err := h.Syncer.LatestRuntimeStatus(); err == nil || err.Error() == "" || !at.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("failed status call: at %v, %v", at, err)
	}
	h.RT.SetHooks(runtimetest.Hooks{})
	h.Clock.Step(time.Second)
	h.Steps(1)
	if _, at, err := h.Syncer.LatestRuntimeStatus(); err != nil || !at.Equal(t0.Add(13*time.Second)) {
		t.Fatalf("after a failed ask: at %v, %v", at, err)
	}
}
