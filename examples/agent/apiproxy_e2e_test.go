package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// kubectl logs, exec, attach and port-forward go the real way: the
// release's kubectl to kube-apiserver, which reaches the agent's node API
// at the Node's InternalIP and kubelet port with its client certificate
// (the agent trusts the control plane's CA through --client-ca-file and
// asks the API server whether kube-apiserver-kubelet-client may use
// nodes/proxy), and the agent to containerd. kubectl speaks WebSocket to
// the API server, which turns exec, attach and port-forward into SPDY
// towards the node (the agent does not declare ExtendWebSocketsToKubelet).
// kubectl logs --previous reads a restarted container's last run, and
// kubectl exec passes stdin and the command's exit code. A client
// certificate of the same CA for a user without nodes/proxy is refused by
// the agent.
func TestKubectlThroughAPIServer(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	bins, err := controlplane.BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.AdminConfig(), kubeconfig); err != nil {
		t.Fatal(err)
	}
	k := kubectl{bin: filepath.Join(bins, "kubectl"), kubeconfig: kubeconfig}

	const node, pod = "e2e-apiproxy", "via-apiserver"
	// kubelet and the agent refuse a loopback node IP: the node API
	// listens on the default-route address, reported as the InternalIP.
	hostIP, err := utilnet.ResolveBindAddress(net.IPv4zero)
	if err != nil || hostIP.IsUnspecified() {
		t.Fatalf("no default-route address for the node API: %v", err)
	}
	api, port := nodeAPIArgs(t)
	startAgent(t, node, append(append(podArgs(t, c, t.TempDir()), api...),
		"--client-ca-file="+cp.ClientCAFile(), "--node-ip="+hostIP.String(), "--address="+hostIP.String())...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	httpAddr := freeAddr(t)
	// The pod serves a page, writes two lines, then answers each
	// /tmp/ping (made by kubectl exec) with a line "pong".
	createHostPod(ctx, t, admin, c, node, pod, fmt.Sprintf(
		"mkdir -p /www && echo page from the pod > /www/index.html && httpd -f -p %s -h /www & "+
			"echo first line; echo last line; "+
			"while true; do if [ -e /tmp/ping ]; then rm -f /tmp/ping; echo pong; fi; sleep 0.2; done", httpAddr))
	// A second pod counts its runs in an emptyDir, prints "run N" and
	// exits: its container restarts (with the back-off) while the first
	// pod is tried.
	restarts := faultPod(node, "restarts", c.BusyboxImage)
	restarts.Spec.Volumes = []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	restarts.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/state"}}
	restarts.Spec.Containers[0].Command = []string{"sh", "-c",
		`n=$(( $(cat /state/n 2>/dev/null || echo 0) + 1 )); echo $n > /state/n; echo "run $n"; sleep 1; exit 1`}
	zero := int64(0)
	if _, err := admin.CoreV1().Pods("default").Create(ctx, restarts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods("default").Delete(context.Background(), restarts.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	testenv.Eventually(t, 2*time.Minute, 100*time.Millisecond, "the pod Running", func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != int32(port) || !hasAddress(n, corev1.NodeInternalIP, hostIP.String()) {
		t.Fatalf("node's kubelet endpoint %d and addresses %v; want port %d and InternalIP %s",
			n.Status.DaemonEndpoints.KubeletEndpoint.Port, n.Status.Addresses, port, hostIP)
	}

	// kubectl logs: both lines once the container has written them.
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "kubectl logs shows the pod's lines", func() bool {
		out, err := k.run(ctx, "logs", pod)
		return err == nil && out == "first line\nlast line\n"
	})
	if out, err := k.run(ctx, "logs", "--tail=1", pod); err != nil || out != "last line\n" {
		t.Errorf("kubectl logs --tail=1: %q, %v; want %q", out, err, "last line\n")
	}
	if out, err := k.run(ctx, "exec", pod, "--", "echo", "hi"); err != nil || out != "hi\n" {
		t.Errorf("kubectl exec -- echo hi: %q, %v; want %q", out, err, "hi\n")
	}
	// kubectl exec -i: stdin reaches the command, and kubectl exits with
	// the command's exit code.
	out, err := k.runInput(ctx, strings.NewReader("hello\n"), "exec", "-i", pod, "--", "sh", "-c", `read x; echo "got $x"; exit 3`)
	var exit *exec.ExitError
	if out != "got hello\n" || !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("kubectl exec -i -- sh -c 'read x; echo got $x; exit 3' with stdin hello: %q, %v; want %q and exit code 3", out, err, "got hello\n")
	}

	// kubectl logs -f sees a line written after it printed the old ones.
	follow := k.start(t, "logs", "-f", pod)
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "kubectl logs -f prints the old lines", func() bool {
		return strings.Contains(follow.out.String(), "last line\n")
	})
	if _, err := k.run(ctx, "exec", pod, "--", "touch", "/tmp/ping"); err != nil {
		t.Fatalf("kubectl exec -- touch /tmp/ping: %v", err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "kubectl logs -f prints the new line", func() bool {
		return strings.Contains(follow.out.String(), "last line\npong\n")
	})
	follow.stop()

	// kubectl attach streams what the main process writes from then on:
	// ping it until a pong arrives (the attach may not be open for the
	// first ping).
	attach := k.start(t, "attach", pod, "-c", "app")
	testenv.Eventually(t, time.Minute, 500*time.Millisecond, "kubectl attach prints a pong", func() bool {
		if strings.Contains(attach.out.String(), "pong") {
			return true
		}
		_, err := k.run(ctx, "exec", pod, "--", "touch", "/tmp/ping")
		return err == nil && strings.Contains(attach.out.String(), "pong")
	})
	attach.stop()

	// kubectl port-forward: a local port chosen by kubectl, to the pod's
	// httpd.
	_, podPort, _ := strings.Cut(httpAddr, ":")
	pf := k.start(t, "port-forward", "pod/"+pod, ":"+podPort)
	forwarding := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> ` + podPort)
	var local string
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "kubectl port-forward listening", func() bool {
		m := forwarding.FindStringSubmatch(pf.out.String())
		if m != nil {
			local = m[1]
		}
		return m != nil
	})
	page, err := httpGet(ctx, &http.Client{Timeout: 30 * time.Second}, "http://127.0.0.1:"+local+"/index.html")
	if err != nil || page != "page from the pod\n" {
		t.Errorf("GET through kubectl port-forward: %q, %v; want %q", page, err, "page from the pod\n")
	}
	pf.stop()

	// kubectl logs --previous: the run before the latest. The restart
	// count is read before and after, so that no restart came between.
	seen := map[string]bool{} // each answer logged once
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "kubectl logs --previous shows the run before the latest", func() bool {
		count := func() int32 {
			p, err := admin.CoreV1().Pods("default").Get(ctx, restarts.Name, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) != 1 {
				return -1
			}
			return p.Status.ContainerStatuses[0].RestartCount
		}
		before := count()
		prev, err1 := k.run(ctx, "logs", "--previous", restarts.Name)
		latest, err2 := k.run(ctx, "logs", restarts.Name)
		after := count()
		if msg := fmt.Sprintf("restarts %d: kubectl logs --previous %q (%v), kubectl logs %q (%v)", after, prev, err1, latest, err2); !seen[msg] {
			seen[msg] = true
			t.Log(msg)
		}
		return before >= 1 && before == after && err1 == nil && err2 == nil &&
			prev == fmt.Sprintf("run %d\n", before) && latest == fmt.Sprintf("run %d\n", before+1)
	})

	// The agent itself refuses a user of the same CA without nodes/proxy.
	nobody, err := cp.UserConfig("nodeapi-nobody")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(nobody.CertData, nobody.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}} //nolint:gosec // the test checks the agent's answer, not its name
	resp, err := cl.Get("https://" + net.JoinHostPort(hostIP.String(), strconv.Itoa(port)) + "/containerLogs/default/" + pod + "/app")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "Forbidden (user=nodeapi-nobody, verb=get, resource=nodes, subresource(s)=[proxy])\n"
	if resp.StatusCode != http.StatusForbidden || string(body) != want {
		t.Errorf("a user without nodes/proxy: %d %q, want 403 %q", resp.StatusCode, body, want)
	}

	for _, name := range []string{pod, restarts.Name} {
		if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty", func() bool { return runtimeEmpty(rt) })
}

func hasAddress(n *corev1.Node, typ corev1.NodeAddressType, addr string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == typ && a.Address == addr {
			return true
		}
	}
	return false
}

// kubectl runs the release's kubectl with a kubeconfig.
type kubectl struct{ bin, kubeconfig string }

// run runs kubectl to its end (at most 30s) and returns its stdout; a
// non-zero exit is an error carrying its stderr.
func (k kubectl) run(ctx context.Context, args ...string) (string, error) {
	return k.runInput(ctx, nil, args...)
}

// runInput is run with stdin read from in (nil: none).
func (k kubectl) runInput(ctx context.Context, in io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig=" + k.kubeconfig}, args...)...)
	cmd.Stdin = in
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// kubectlProc is a kubectl that runs until stopped (logs -f, attach,
// port-forward).
type kubectlProc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer // stdout and stderr
	done chan struct{}
}

// start starts kubectl in the background; it is killed at the test's end
// unless stopped before.
func (k kubectl) start(t *testing.T, args ...string) *kubectlProc {
	t.Helper()
	p := &kubectlProc{out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(k.bin, append([]string{"--kubeconfig=" + k.kubeconfig}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("kubectl %s:\n%s", strings.Join(args, " "), p.out.String())
		}
	})
	return p
}

// stop kills kubectl and waits for it.
func (p *kubectlProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func httpGet(ctx context.Context, cl *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}
