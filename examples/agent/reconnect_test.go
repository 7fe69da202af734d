package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// The agent's API connection dies silently (a TCP proxy in front of the API
// server black-holes it): after two failed heartbeat requests the agent
// closes its connections (OnRepeatedFailure), dials again and renews its
// lease. (An idle node's status round makes no request; the status side of
// the hook is tested in package heartbeat.)
func TestAgentReconnectsAfterRepeatedFailures(t *testing.T) {
	cp := controlplane.Need(t, cp)
	const name = "agent-reconnect"
	t.Cleanup(func() {
		admin := cp.AdminClient()
		_ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	direct, err := cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	rc, px, err := testenv.ProxyConfig(direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	kc := filepath.Join(t.TempDir(), "node.kubeconfig")
	if err := controlplane.WriteKubeconfig(rc, kc); err != nil {
		t.Fatal(err)
	}
	// Short periods make the request timeouts short (1s), so that the
	// black-holed requests fail fast.
	cfg := &config{kubeconfig: kc, hostnameOverride: name, registerNode: true,
		statusUpdateFrequency: time.Second, leaseDuration: 4 * time.Second,
		diskUsagePath: t.TempDir(), diskUsageThreshold: 99.9, maxPods: 110}
	a, err := newAgent(cfg, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.node.Heartbeat().SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.node.Heartbeat().SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	// Lease: two renewals fail on a dead connection, the third renews.
	before := px.Accepted()
	px.Blackhole()
	var renewErr error
	for range 3 {
		if _, renewErr = a.node.Heartbeat().SyncLease(ctx); renewErr == nil {
			break
		}
	}
	if renewErr != nil || px.Accepted() == before {
		t.Fatalf("renewal after repeated failures: %v (new connections %d)", renewErr, px.Accepted()-before)
	}
	l, err := cp.AdminClient().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil || time.Since(l.Spec.RenewTime.Time) > 10*time.Second {
		t.Fatalf("lease after reconnecting: %v, %v", l, err)
	}
}
