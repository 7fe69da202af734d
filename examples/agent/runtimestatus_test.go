package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// The node's Ready condition follows the pod half's relists: before the
// pod half runs it says the runtime check has not completed; after a relist
// it is Ready; a network that goes down shows only once a relist saw it
// (the setters do not ask the runtime themselves; a ready runtime is asked
// every 5s), with kubelet's message.
func TestNodeReadyFromPodHalfRelist(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := &config{hostnameOverride: "n1", maxPods: 110}
	rt := runtimetest.New(runtimetest.Options{NoCallLog: true})
	clk := testingclock.NewFakeClock(time.Now())
	syncer, err := cri.New(cri.Options{Runtime: rt, Clock: clk, PodLogRoot: t.TempDir(), PodRoot: t.TempDir(), ResolvConf: "-"})
	if err != nil {
		t.Fatal(err)
	}
	so := statusOptions(cfg, "n1", rt)
	so.RuntimeStatus = syncer // as the node half takes it from the pod half's backend
	so.Clock = clk
	setters, err := nodestatus.DefaultSetters(so)
	if err != nil {
		t.Fatal(err)
	}
	ready := func() corev1.NodeCondition {
		t.Helper()
		node := nodeTemplate(cfg, "n1")
		_ = setters.SetStatus(ctx, node)
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c
			}
		}
		t.Fatal("no Ready condition")
		return corev1.NodeCondition{}
	}
	if c := ready(); c.Status != corev1.ConditionFalse || c.Message != "container runtime status check may not have completed yet" {
		t.Fatalf("before the pod half: %s %q", c.Status, c.Message)
	}

	if _, err := syncer.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if c := ready(); c.Status != corev1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Fatalf("after a relist: %s %q", c.Status, c.Message)
	}

	fake := rt
	fake.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	// Still Ready: the setters read the last relist, not the runtime.
	if c := ready(); c.Status != corev1.ConditionTrue {
		t.Fatalf("before the next relist: %s %q", c.Status, c.Message)
	}
	clk.Step(cri.DefaultStatusPeriod)
	if _, err := syncer.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if c := ready(); c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" ||
		c.Message != "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized" {
		t.Fatalf("after a relist that saw the network down: %s %s %q", c.Status, c.Reason, c.Message)
	}
}
