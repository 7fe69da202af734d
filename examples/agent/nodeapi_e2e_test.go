package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// The agent serves kubelet's node API on --port: over TLS, a client
// certificate of the cluster's CA (the admin's) reads the usage of a pod
// it runs on containerd and that pod's log, and runs a command in it; a
// request without credentials is refused; the Node reports the port as its
// kubelet endpoint.
func TestAgentNodeAPIOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	cfg := cp.AdminConfig()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, cfg.TLSClientConfig.CAData, 0o644); err != nil {
		t.Fatal(err)
	}

	const node = "e2e-nodeapi"
	api, port := nodeAPIArgs(t)
	startAgent(t, node, append(append(podArgs(t, c, t.TempDir()), api...), "--client-ca-file="+caFile)...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	createHostPod(ctx, t, admin, c, node, "api-logs", "echo hello from the node API; "+sleeper)
	var uid string
	testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the pod Running", func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "api-logs", metav1.GetOptions{})
		uid = string(p.GetUID())
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != int32(port) {
		t.Errorf("daemonEndpoints.kubeletEndpoint.port %d, want %d", got, port)
	}

	base := "https://127.0.0.1:" + strconv.Itoa(port)
	cert, err := tls.X509KeyPair(cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	// The serving certificate is self-signed: pin it, as a client that
	// fetched it would (the API server does not verify it by default).
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test checks the server's answers, not its name
	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure}}
	authed := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}} //nolint:gosec // as above
	get := func(cl *http.Client, path string) (int, []byte) {
		t.Helper()
		resp, err := cl.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	if code, _ := get(anon, "/stats/summary"); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	for _, path := range []string{"/containerLogs/default/api-logs/..%2F..%2Fetc", "/containerLogs/../default/api-logs/app"} {
		if code, body := get(authed, path); code != http.StatusBadRequest {
			t.Errorf("traversal %s: %d %s, want 400", path, code, body)
		}
	}
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the pod's log through /containerLogs", func() bool {
		code, body := get(authed, "/containerLogs/default/api-logs/app")
		return code == http.StatusOK && strings.Contains(string(body), "hello from the node API")
	})
	// /run executes in the pod's container through the runtime.
	resp, err := authed.Post(base+"/run/default/api-logs/app?cmd=echo%20ran%20here", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(out)) != "ran here" {
		t.Errorf("/run: %d %q, want 200 \"ran here\"", resp.StatusCode, out)
	}
	// The collector samples every 10s: wait for one that has the pod.
	var sum statsapi.Summary
	testenv.Eventually(t, time.Minute, 500*time.Millisecond, "the pod in /stats/summary", func() bool {
		code, body := get(authed, "/stats/summary")
		if code != http.StatusOK || json.Unmarshal(body, &sum) != nil {
			return false
		}
		for _, p := range sum.Pods {
			if p.PodRef.UID == uid && len(p.Containers) == 1 && p.Containers[0].Memory != nil && p.Containers[0].Memory.WorkingSetBytes != nil {
				return true
			}
		}
		return false
	})
	if sum.Node.NodeName != node || sum.Node.CPU == nil || sum.Node.Memory == nil {
		t.Errorf("node stats %+v", sum.Node)
	}
	code, body := get(authed, "/metrics/resource")
	if code != http.StatusOK || !strings.Contains(string(body), `container_memory_working_set_bytes{container="app",namespace="default",pod="api-logs"}`) {
		t.Errorf("/metrics/resource: %d\n%s", code, body)
	}
	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "api-logs", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty", func() bool { return runtimeEmpty(rt) })
}

// nodeAPIArgs are the flags that serve the node API on a free port of
// 127.0.0.1 with its self-signed certificate in a temporary directory; it
// returns them and the port.
func nodeAPIArgs(t *testing.T) ([]string, int) {
	t.Helper()
	_, p, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--port=" + p, "--address=127.0.0.1", "--cert-dir=" + t.TempDir()}, port
}
