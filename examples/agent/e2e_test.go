package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/nodestatus"
)

// cp is the test control plane, ctrd the host's containerd 1.x and ctrd2
// a containerd 2 from the test binaries; nil in -short mode or when they
// are not available (the tests then skip).
var (
	cp          *controlplane.ControlPlane
	ctrd, ctrd2 *containerdtest.Containerd
)

func TestMain(m *testing.M) {
	os.Exit(containerdtest.MainBoth(func() int {
		code := controlplane.MainWith(m, &cp, controlplane.Options{Aggregator: true})
		if binDir != "" {
			os.RemoveAll(binDir)
		}
		return code
	}, &ctrd, &ctrd2))
}

// bothRuntimes are the two containerds the end-to-end tests run on: the
// host's 1.x and containerd 2. suffix ends the names of a test's node and
// pods on it, so that tests on both can share the control plane.
var bothRuntimes = []struct {
	name, suffix string
	need         func(testing.TB) *containerdtest.Containerd
}{
	{"containerd1", "", func(t testing.TB) *containerdtest.Containerd { return containerdtest.Need(t, ctrd) }},
	{"containerd2", "2", func(t testing.TB) *containerdtest.Containerd { return containerdtest.Need2(t, ctrd2) }},
}

// onBothRuntimes runs test on each of bothRuntimes, in parallel subtests.
func onBothRuntimes(t *testing.T, test func(t *testing.T, c *containerdtest.Containerd, suffix string)) {
	for _, r := range bothRuntimes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			test(t, r.need(t), r.suffix)
		})
	}
}

// The agent binary, built once per test run into binDir.
var (
	buildOnce sync.Once
	binDir    string
	agentBin  string
	buildErr  error
)

func buildAgent(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var err error
		if binDir, err = os.MkdirTemp("", "nodekit-agent-bin-"); err != nil {
			buildErr = err
			return
		}
		agentBin = filepath.Join(binDir, "agent")
		// Built as hack/demo.sh builds it: static, without cgo.
		cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", agentBin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return agentBin
}

// agentProc is a running agent binary.
type agentProc struct {
	cmd     *exec.Cmd
	started time.Time
	listen  string
	done    chan struct{}
	waitErr error
	log     *lockedBuffer
}

// startAgent writes a kubeconfig for system:node:<name> and starts the agent
// with it, in a process group of its own, plus args.
func startAgent(t *testing.T, name string, args ...string) *agentProc {
	t.Helper()
	cfg, err := cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "node.kubeconfig")
	if err := controlplane.WriteKubeconfig(cfg, kc); err != nil {
		t.Fatal(err)
	}
	return startStandalone(t, name, append([]string{"--kubeconfig=" + kc}, args...)...)
}

// startStandalone starts the agent without a kubeconfig (unless args has
// one), in a process group of its own, plus args.
func startStandalone(t *testing.T, name string, args ...string) *agentProc {
	t.Helper()
	bin := buildAgent(t)
	listen := freeAddr(t)
	p := &agentProc{listen: listen, done: make(chan struct{}), log: &lockedBuffer{}}
	p.cmd = exec.Command(bin, append([]string{
		// No node API unless args ask for one (--port): kubelet's
		// default port is the machine's, and its default certificate
		// directory is under /var/lib/kubelet.
		"--hostname-override=" + name, "--listen=" + listen, "--port=0", "-v=2",
	}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", p.log.String())
		}
	})
	return p
}

// stop sends SIGTERM and checks that the agent exits with status 0 within
// 5s and leaves no process of its group behind.
func (p *agentProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("agent still running 5s after SIGTERM")
	}
	t.Logf("agent exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if p.waitErr != nil {
		t.Errorf("agent exit: %v", p.waitErr)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("processes of the agent's group remain after it exited (kill -0: %v)", err)
	}
	if l := p.log.String(); !strings.Contains(l, "Stopped; pods are left running and the node lease to expire") {
		t.Errorf("no clean-stop line in the agent's log")
	}
}

func (p *agentProc) get(t *testing.T, path string) string {
	t.Helper()
	b, err := p.fetch(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fetch GETs path from the agent's HTTP server.
func (p *agentProc) fetch(path string) (string, error) {
	resp, err := http.Get("http://" + p.listen + path)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b), nil
}

func TestAgentOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)

	const name = "e2e-containerd"
	admin := cp.AdminClient()
	p := startAgent(t, name,
		"--container-runtime-endpoint="+c.Endpoint,
		sharedDiskArgs[0], sharedDiskArgs[1], sharedDiskArgs[2],
		"--node-lease-duration-seconds=4", // renewed every 1s
		"--disk-usage-path="+t.TempDir(),
		"--disk-usage-threshold=99.9",
		"--node-labels=example.com/pool=e2e",
	)

	node := waitNode(ctx, t, admin, name, p.started, 10*time.Second, func(n *corev1.Node) bool {
		return condition(n, corev1.NodeReady) == corev1.ConditionTrue
	})
	t.Logf("node Ready %v after the agent started", time.Since(p.started).Round(time.Millisecond))
	if v := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(v, "containerd://") {
		t.Errorf("containerRuntimeVersion = %q; want containerd://…", v)
	}
	if s := condition(node, nodestatus.DiskUsageCondition); s != corev1.ConditionFalse {
		t.Errorf("%s = %q; want False on a file system under 99.9%%", nodestatus.DiskUsageCondition, s)
	}
	if node.Labels["example.com/pool"] != "e2e" || node.Labels[corev1.LabelHostname] != name {
		t.Errorf("labels = %v", node.Labels)
	}
	if len(node.Status.Images) == 0 {
		t.Errorf("no images in the node's status; containerd has %s and %s", c.PauseImage, c.BusyboxImage)
	}

	renewals := waitLeaseRenewals(ctx, t, admin, name, 2, 15*time.Second)
	last := renewals[len(renewals)-1]
	if d := last.Spec.LeaseDurationSeconds; d == nil || *d != 4 {
		t.Errorf("leaseDurationSeconds = %v; want 4", d)
	}
	if refs := last.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != node.UID {
		t.Errorf("lease owner references = %+v; want the Node %s", refs, node.UID)
	}

	if got := p.get(t, "/healthz"); got != "ok" {
		t.Errorf("/healthz = %q", got)
	}
	metrics := p.get(t, "/metrics")
	if n := metricValue(metrics, "nodekit_lease_renewals_total"); n < 2 {
		t.Errorf("nodekit_lease_renewals_total = %v; want at least 2", n)
	}
	if n := metricValue(metrics, `nodekit_agent_api_requests_total{code="200",resource="leases",verb="PUT"}`); n < 2 {
		t.Errorf("lease PUTs counted = %v; want at least 2", n)
	}

	p.stop(t)
	// The lease is left to expire, as kubelet leaves it.
	if _, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("lease after stop: %v", err)
	}
}

// Without --container-runtime-endpoint the agent runs on the fake runtime;
// this needs only the control plane.
func TestAgentOnFakeRuntime(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "e2e-fake"
	p := startAgent(t, name, "--node-lease-duration-seconds=4")
	node := waitNode(ctx, t, cp.AdminClient(), name, p.started, 10*time.Second, func(n *corev1.Node) bool {
		return condition(n, corev1.NodeReady) == corev1.ConditionTrue
	})
	if v := node.Status.NodeInfo.ContainerRuntimeVersion; v != "fake://1.0.0" {
		t.Errorf("containerRuntimeVersion = %q; want fake://1.0.0", v)
	}
	if condition(node, nodestatus.DiskUsageCondition) == "" {
		t.Errorf("no %s condition", nodestatus.DiskUsageCondition)
	}
	if !strings.Contains(p.log.String(), "using the in-memory fake runtime") {
		t.Errorf("the log does not say the runtime is the fake")
	}
	waitLeaseRenewals(ctx, t, cp.AdminClient(), name, 1, 10*time.Second)
	p.stop(t)
}

// enableNetwork makes the harness's containerd report NetworkReady, within
// 30s.
func enableNetwork(ctx context.Context, t *testing.T, c *containerdtest.Containerd) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.EnableNetwork(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitNode watches the Node until ok(node) holds, and fails when that takes
// longer than within since start.
func waitNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, start time.Time, within time.Duration, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	deadline := start.Add(within)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *corev1.Node
	for wctx.Err() == nil {
		list, err := c.CoreV1().Nodes().List(wctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			pause(wctx)
			continue
		}
		for i := range list.Items {
			last = &list.Items[i]
			if ok(last) {
				return last
			}
		}
		w, err := c.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			pause(wctx)
			continue
		}
		for ev := range w.ResultChan() {
			if n, isNode := ev.Object.(*corev1.Node); isNode && ev.Type != watch.Deleted {
				last = n
				if ok(n) {
					w.Stop()
					return n
				}
			}
		}
		w.Stop()
	}
	t.Fatalf("node %s: condition not met within %v of the agent's start; last seen: %s", name, within, describeNode(last))
	return nil
}

// waitLeaseRenewals polls the node's lease (every 100ms, renewals in these
// tests come every second) until its renewTime has advanced n times, and
// returns the versions seen.
func waitLeaseRenewals(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, n int, within time.Duration) []*coordinationv1.Lease {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var seen []*coordinationv1.Lease
	for wctx.Err() == nil && len(seen) < n+1 {
		l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(wctx, name, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil &&
			(len(seen) == 0 || l.Spec.RenewTime.After(seen[len(seen)-1].Spec.RenewTime.Time)) {
			seen = append(seen, l)
		}
		pause(wctx)
	}
	if len(seen) < n+1 {
		t.Fatalf("lease %s: %d renewTime values within %v; want %d renewals after the first", name, len(seen), within, n)
	}
	for _, l := range seen {
		t.Logf("lease renewTime %s", l.Spec.RenewTime.Format(time.RFC3339Nano))
	}
	return seen
}

// pause waits 100ms or until ctx ends.
func pause(ctx context.Context) {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func condition(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func describeNode(n *corev1.Node) string {
	if n == nil {
		return "no node"
	}
	var b strings.Builder
	for _, c := range n.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s (%s: %s); ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// metricValue returns the value of the first sample in a Prometheus text
// exposition whose name (with labels, as written) is name, or -1.
func metricValue(exposition, name string) float64 {
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
