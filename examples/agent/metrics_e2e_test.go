package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// busyLoop is a pod command that holds 4 MB in a shell variable and uses a
// little CPU every second (a few thousand shell additions), so that its
// usage rounds to more than 0Mi and 0m (busybox sleeping uses less than
// half a MiB).
const busyLoop = `trap 'exit 0' TERM; x=$(head -c 4000000 /dev/zero | tr '\0' x); ` +
	`while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done`

// The real metrics-server scrapes the agent's node API, and `kubectl top`
// shows the node and its pod: metrics-server reaches the node at its
// InternalIP and the port of its daemonEndpoints, verifies the agent's
// self-signed certificate, and authenticates with its ServiceAccount
// token, which the agent reviews (TokenReview) and authorizes
// (SubjectAccessReview on nodes/metrics): without that permission its
// scrapes are forbidden, the agent's log says so for its user, and
// `kubectl top node` has nothing; once granted, the figures come.
func TestAgentMetricsServerOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	nodeIP := hostIP(t)

	const node = "e2e-metrics"
	certDir := t.TempDir()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, node, append(podArgs(t, c, t.TempDir()),
		"--port="+port, "--address="+nodeIP, "--node-ip="+nodeIP, "--cert-dir="+certDir,
		// A denial is not kept past the grant below for kubelet's 30s.
		"--authorization-webhook-cache-unauthorized-ttl=1s")...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	// metrics-server verifies the agent's self-signed certificate, which
	// the agent writes as it starts.
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the agent's serving certificate", func() bool {
		_, err := os.Stat(filepath.Join(certDir, "kubelet.crt"))
		return err == nil
	})
	ms := controlplane.NeedMetricsServer(t, cp, controlplane.MetricsServerOptions{
		KubeletCAFile:      filepath.Join(certDir, "kubelet.crt"),
		WithoutNodeMetrics: true,
	})
	createHostPod(ctx, t, admin, c, node, "busy", busyLoop)
	testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the pod Running", func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "busy", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)); got != port {
		t.Fatalf("daemonEndpoints port %s, want %s", got, port)
	}

	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "metrics-server's scrape forbidden in the agent's log", func() bool {
		return forbiddenLine(p.log.String(), controlplane.MetricsServerUser, "metrics") != ""
	})
	t.Logf("agent: %s", forbiddenLine(p.log.String(), controlplane.MetricsServerUser, "metrics"))
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.AdminConfig(), kc); err != nil {
		t.Fatal(err)
	}
	bins, err := controlplane.BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	k := kubectl{bin: filepath.Join(bins, "kubectl"), kubeconfig: kc}
	if out, err := k.run(ctx, "top", "node", node, "--no-headers"); err == nil {
		t.Fatalf("kubectl top node while metrics-server may not read nodes/metrics: %s", out)
	}

	if err := ms.GrantNodeMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	var nodeTop, podTop []string
	seen := map[string]bool{} // kubectl's answers, each logged once
	top := func(name string, args ...string) []string {
		out, err := k.run(ctx, args...)
		if msg := strings.TrimSpace(out); !seen[msg] {
			seen[msg] = true
			t.Logf("kubectl %s: %v: %s", strings.Join(args, " "), err, msg)
		}
		if err != nil {
			return nil
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == name {
				return f
			}
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, time.Second, "kubectl top node with CPU and memory", func() bool {
		nodeTop = top(node, "top", "node", node, "--no-headers")
		return len(nodeTop) == 5 && nonZero(nodeTop[1]) && nonZero(nodeTop[3])
	})
	testenv.Eventually(t, 2*time.Minute, time.Second, "kubectl top pod with CPU and memory", func() bool {
		podTop = top("busy", "top", "pod", "busy", "--namespace=default", "--no-headers")
		return len(podTop) == 3 && nonZero(podTop[1]) && nonZero(podTop[2])
	})
	t.Logf("kubectl top node: %v; kubectl top pod: %v", nodeTop, podTop)

	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "busy", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty", func() bool { return runtimeEmpty(rt) })
}

// hostIP returns the host's default-route IPv4 address, which the node
// reports as its InternalIP (a loopback address is not a node address).
func hostIP(t *testing.T) string {
	t.Helper()
	// No packet is sent: connecting a UDP socket only picks the route.
	conn, err := net.Dial("udp", "192.0.2.1:53")
	if err != nil {
		t.Skipf("no default route for a node address: %v", err)
	}
	defer conn.Close()
	ip := conn.LocalAddr().(*net.UDPAddr).IP
	if ip.IsLoopback() {
		t.Skipf("the default route's address %s is a loopback address", ip)
	}
	return ip.String()
}

// nonZero reports whether s is a quantity (123m, 45Mi) above zero.
func nonZero(s string) bool {
	q, err := resource.ParseQuantity(s)
	return err == nil && q.Sign() > 0
}

// forbiddenLine returns the node API's log line that refused user a
// request needing nodes/<subresource>, or "".
func forbiddenLine(log, user, subresource string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"Forbidden"`) && strings.Contains(line, `user="`+user+`"`) &&
			strings.Contains(line, `"`+subresource+`"`) {
			return line
		}
	}
	return ""
}
