package heartbeat_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/lease"
)

// runHeartbeat starts hb.Run and stops it at the end of the test.
func runHeartbeat(t *testing.T, hb *heartbeat.Heartbeat) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hb.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
}

// When the node lifecycle controller (here: an admin writing as it does)
// sets Ready=Unknown on a healthy node, the agent posts Ready=True again
// within one status round, though its computed status did not change and
// the report frequency (5m) is far away: it compares against the Node as
// the API server has it (the watch), not as it last wrote it.
func TestIntegrationReadyUnknownWrittenByOthersIsCorrected(t *testing.T) {
	integration(t)
	const name = "unknown-fixed"
	cleanup(t, name)
	client, _ := nodeClient(t, name, nil)
	hb, err := heartbeat.New(heartbeat.Options{
		Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: newKubeletLike(clock.RealClock{}),
		NodeStatusUpdateFrequency: time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	runHeartbeat(t, hb)
	admin := cp.AdminClient()
	ctx := ctxFor(t, time.Minute)
	testenv.Eventually(t, 20*time.Second, 50*time.Millisecond, "node registered and Ready", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && readyOf(n) == corev1.ConditionTrue
	})
	// Let the watch see the agent's own writes first.
	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "a round after registration", func() bool {
		return hb.Node() != nil
	})
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
		c.LastTransitionTime = now
	}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "Ready=True posted again", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && readyOf(n) == corev1.ConditionTrue
	})
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Ready=True posted again after %v, want within one round (1s) and its jitter", d)
	}
}

// kubelet puts kubernetes.io/hostname, os and arch back on its Node when
// someone removes them; NodeRestriction lets the node do that.
func TestIntegrationRequiredLabelsPutBack(t *testing.T) {
	integration(t)
	const name = "labels-back"
	cleanup(t, name)
	client, _ := nodeClient(t, name, nil)
	want := map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}
	tmpl := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"example.com/pool": "edge"}}}
	for k, v := range want {
		tmpl.Labels[k] = v
	}
	hb, err := heartbeat.New(heartbeat.Options{
		Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: newKubeletLike(clock.RealClock{}), Node: tmpl,
		NodeStatusUpdateFrequency: time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	runHeartbeat(t, hb)
	admin := cp.AdminClient()
	ctx := ctxFor(t, time.Minute)
	testenv.Eventually(t, 20*time.Second, 50*time.Millisecond, "node registered", func() bool {
		_, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil
	})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{
		corev1.LabelHostname: nil, corev1.LabelOSStable: nil, corev1.LabelArchStable: "arm64",
	}}})
	if _, err := admin.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels put back", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for k, v := range want {
			if n.Labels[k] != v {
				return false
			}
		}
		return n.Labels["example.com/pool"] == "edge"
	})
}

// After repeated failures on a dead connection, OnRepeatedFailure closes the
// client's connections (as examples/agent does, and kubelet) and the next
// request dials a new one: the status round and the lease renewal succeed
// again long before HTTP/2's own health check would give up on the dead
// connection.
func TestIntegrationRepeatedFailureHookReconnects(t *testing.T) {
	integration(t)
	const name = "blackholed"
	cleanup(t, name)
	direct, err := cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, px, err := testenv.ProxyConfig(direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 5 * time.Second}).DialContext)
	cfg.Dial = dialer.DialContext
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var hooks atomic.Int32
	hook := func() { hooks.Add(1); dialer.CloseAll() }
	hb, err := heartbeat.New(heartbeat.Options{
		Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: newKubeletLike(clock.RealClock{}),
		Strategy: heartbeat.StatusOnlyStrategy(), RequestTimeout: 500 * time.Millisecond,
		OnRepeatedFailure: hook,
	})
	if err != nil {
		t.Fatal(err)
	}
	lr, err := lease.New(lease.Options{Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: client.CoreV1().Nodes(), NodeName: name, RequestTimeout: 500 * time.Millisecond, LookupNodeUID: true, OnRepeatedFailure: hook})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	if err := hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lr.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := px.Accepted()
	px.Blackhole()
	// The status round: attempts 0 and 1 time out on the dead connection,
	// the hook closes it, attempt 2 dials again and writes.
	if err := hb.SyncStatus(ctx); err != nil {
		t.Fatalf("status round over a black-holed connection: %v", err)
	}
	if hooks.Load() == 0 || px.Accepted() == before {
		t.Fatalf("hook calls %d, new connections %d", hooks.Load(), px.Accepted()-before)
	}
	// The lease: a renewal that times out counts one failure; the second
	// calls the hook; the third works on a new connection.
	before, hooksBefore := px.Accepted(), hooks.Load()
	px.Blackhole()
	var renewErr error
	for i := range 3 {
		if _, renewErr = lr.SyncOnce(ctx); renewErr == nil {
			break
		}
		if i == 2 {
			t.Fatalf("renewal %d over a black-holed connection: %v", i, renewErr)
		}
	}
	if hooks.Load() == hooksBefore || px.Accepted() == before {
		t.Fatalf("lease: hook calls %d, new connections %d", hooks.Load()-hooksBefore, px.Accepted()-before)
	}
}

// The same with the real node lifecycle controller: kube-controller-manager
// marks the node Unknown while its agent is stopped; once the agent runs
// again (same Heartbeat, nothing changed in its computed status) it posts
// Ready=True within a few rounds, long before its 5m report would be due.
func TestIntegrationNodeLifecycleControllerUnknownIsCorrected(t *testing.T) {
	cp := integration(t)
	dir, err := controlplane.BinaryDir()
	if err != nil {
		t.Skip(err)
	}
	kcmBin := filepath.Join(dir, "kube-controller-manager")
	if _, err := os.Stat(kcmBin); err != nil {
		testenv.Missing(t, "kube-controller-manager", "testbin", err)
	}
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.AdminConfig(), kc); err != nil {
		t.Fatal(err)
	}
	kcm := exec.Command(kcmBin, "--kubeconfig="+kc, "--controllers=node-lifecycle-controller",
		"--leader-elect=false", "--secure-port=0", "--node-monitor-period=1s",
		"--node-monitor-grace-period=6s", "--node-startup-grace-period=6s")
	if err := kcm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Process.Kill(); _ = kcm.Wait() })

	const name = "kcm-unknown"
	cleanup(t, name)
	client, _ := nodeClient(t, name, nil)
	hb, err := heartbeat.New(heartbeat.Options{
		Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: newKubeletLike(clock.RealClock{}),
		NodeStatusUpdateFrequency: time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,
		LeaseOptions:              lease.Options{LeaseDuration: 4 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := cp.AdminClient()
	ctx := ctxFor(t, 2*time.Minute)
	ready := func() corev1.ConditionStatus {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return readyOf(n)
	}
	run1, stop1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- hb.Run(run1) }()
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "node Ready", func() bool { return ready() == corev1.ConditionTrue })
	stop1()
	if err := <-done1; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	testenv.Eventually(t, 60*time.Second, 200*time.Millisecond, "the node lifecycle controller marks the node Unknown", func() bool {
		return ready() == corev1.ConditionUnknown
	})
	runHeartbeat(t, hb)
	start := time.Now()
	testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, "Ready=True posted again", func() bool { return ready() == corev1.ConditionTrue })
	t.Logf("Ready=True posted again %v after the agent resumed", time.Since(start))
}
