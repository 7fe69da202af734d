package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/remote"
)

// busyLoop is a pod command that holds 4 MB in a shell variable (so that
// its memory rounds to more than 0Mi) and uses CPU at an even rate: a few
// hundred shell additions, then a tenth of a second asleep, over and over.
const busyLoop = `trap 'exit 0' TERM; x=$(head -c 4000000 /dev/zero | tr '\0' x); ` +
	`while true; do i=0; while [ $i -lt 800 ]; do i=$((i+1)); done; sleep 0.1; done`

// The real metrics-server scrapes the agent's node API, and `kubectl top`
// shows the node and its pod: metrics-server reaches the node at its
// InternalIP and the port of its daemonEndpoints, verifies the agent's
// self-signed certificate, and authenticates with its ServiceAccount
// token, which the agent reviews (TokenReview) and authorizes
// (SubjectAccessReview on nodes/metrics): without that permission its
// scrapes are forbidden, the agent's log says so for its user, and
// `kubectl top node` has nothing; once granted, the figures come, and the
// pod's CPU in `kubectl top pod` is within 20% of what /proc says its
// process used over the same window.
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
	procCPU := sampleProcCPU(t, rt, "busy")
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

	// kubectl top pod against /proc over the window of the metrics API's
	// value: the metrics API, kubectl and the metrics API again, so that
	// kubectl's figure is known to come from the window read (no scrape
	// in between). The window's end is given to the second: its middle is
	// taken, which the pod's even rate makes good to a percent or two.
	var topMilli, procMilli float64
	var window string
	testenv.Eventually(t, 2*time.Minute, time.Second, "a metrics API window of the pod that /proc covers", func() bool {
		before, err := podMetrics(ctx, admin, "default", "busy")
		if err != nil {
			return false
		}
		f := top("busy", "top", "pod", "busy", "--namespace=default", "--no-headers")
		after, err := podMetrics(ctx, admin, "default", "busy")
		if err != nil || len(f) != 3 || !after.Timestamp.Equal(&before.Timestamp) || after.Window != before.Window {
			return false
		}
		end := before.Timestamp.Add(500 * time.Millisecond)
		rate, ok := procCPU.rate(end.Add(-before.Window.Duration), end)
		if !ok {
			return false
		}
		q, err := resource.ParseQuantity(f[1])
		if err != nil {
			t.Fatalf("kubectl top pod's CPU %q: %v", f[1], err)
		}
		topMilli, procMilli = float64(q.MilliValue()), rate*1000
		window = fmt.Sprintf("%v ending %v", before.Window.Duration, before.Timestamp.UTC().Format(time.RFC3339))
		return true
	})
	t.Logf("pod CPU over %s: kubectl top pod %.0fm, /proc %.1fm", window, topMilli, procMilli)
	if procMilli < 10 {
		t.Fatalf("the busy pod used %.1fm of CPU by /proc over %s: too little to compare", procMilli, window)
	}
	// kubectl rounds up to a millicore.
	if d := topMilli - procMilli; d > 0.2*procMilli+1 || -d > 0.2*procMilli {
		t.Errorf("kubectl top pod says %.0fm over %s, /proc %.1fm: more than 20%% apart", topMilli, window, procMilli)
	}

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

// podMetrics reads a pod's entry in the metrics API (metrics.k8s.io).
func podMetrics(ctx context.Context, admin kubernetes.Interface, namespace, name string) (*podMetricsEntry, error) {
	b, err := admin.CoreV1().RESTClient().Get().
		AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", namespace, "pods", name).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var m podMetricsEntry
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("pod metrics %s: %w", b, err)
	}
	return &m, nil
}

// podMetricsEntry is the part of metrics.k8s.io/v1beta1 PodMetrics read
// here.
type podMetricsEntry struct {
	Timestamp metav1.Time     `json:"timestamp"`
	Window    metav1.Duration `json:"window"`
}

// procCPU is a process's CPU time (its own and its reaped children's, from
// /proc/<pid>/stat) sampled every 100 ms until the test ends.
type procCPU struct {
	mu      sync.Mutex
	at      []time.Time
	seconds []float64
}

// sampleProcCPU samples the CPU time of the process of pod's running
// container in rt.
func sampleProcCPU(t *testing.T, rt *remote.Client, pod string) *procCPU {
	t.Helper()
	ctx := context.Background()
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.name": pod},
	})
	if err != nil || len(cs) != 1 {
		t.Fatalf("pod %s's running container: %v, %v", pod, cs, err)
	}
	st, err := rt.ContainerStatus(ctx, cs[0].Id, true)
	if err != nil {
		t.Fatal(err)
	}
	pid := containerdtest.ContainerPid(st.Info["info"])
	if pid == 0 {
		t.Fatalf("no pid in the verbose status of container %s", cs[0].Id)
	}
	p := &procCPU{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if ticks, err := testenv.ProcCPUTicksWithChildren(pid); err == nil {
				p.mu.Lock()
				p.at, p.seconds = append(p.at, time.Now()), append(p.seconds, float64(ticks)/testenv.TicksPerSecond)
				p.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(done); wg.Wait() })
	return p
}

// rate is the CPU the process used from one time to another, in cores,
// interpolated between samples; false when the samples do not cover both.
func (p *procCPU) rate(from, to time.Time) (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := func(x time.Time) (float64, bool) {
		for i := 1; i < len(p.at); i++ {
			if !p.at[i].Before(x) && !p.at[i-1].After(x) {
				span := p.at[i].Sub(p.at[i-1]).Seconds()
				if span == 0 {
					return p.seconds[i], true
				}
				w := x.Sub(p.at[i-1]).Seconds() / span
				return p.seconds[i-1] + w*(p.seconds[i]-p.seconds[i-1]), true
			}
		}
		return 0, false
	}
	a, ok1 := at(from)
	b, ok2 := at(to)
	if !ok1 || !ok2 || !to.After(from) {
		return 0, false
	}
	return (b - a) / to.Sub(from).Seconds(), true
}
