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

	h.RT.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	h.Clock.Step(time.Second)
	h.Steps(1)
	st, at, err = h.Syncer.LatestRuntimeStatus()
	if err != nil || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("second relist: at %v, %v", at, err)
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
	for _, c := range h.RT.Calls() {
		if c.Method == "Status" {
			t.Fatal("node status asked the runtime for its status")
		}
	}

	fail := runtimetest.Errors(errors.New("deadline exceeded"))
	h.RT.SetHooks(runtimetest.Hooks{Status: func(context.Context, bool) error { return fail() }})
	h.Clock.Step(time.Second)
	h.Steps(1)
	if _, at, err := h.Syncer.LatestRuntimeStatus(); err == nil || err.Error() == "" || !at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("failed status call: at %v, %v", at, err)
	}
}
