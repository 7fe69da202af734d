package nodekit_test

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/cri/backend"
	"github.com/nodekit/nodekit/podsync/volume"
	"github.com/nodekit/nodekit/runtime/remote"
)

// The tests below run an agent's two halves as NewPodHalf and NewNodeHalf
// build them (pod sources and mirror pods → podsync.Engine on the CRI
// backend with probes → status.Writer; the node's registration and
// heartbeat) as system:node:<name> under NodeRestriction, on the test
// control plane and the real containerd.

// ctrd is the real containerd of the pod half's tests (TestMain).
var ctrd *containerdtest.Containerd

// podHalf is an agent's pod half and node half on the real containerd and
// the test control plane. The pod half's requests are counted in three
// parts: the API source (the pods of all namespaces), the pods of a
// namespace (the status writer, and mirror pods when there are static
// pods), and the node's own (registration, heartbeat, lease, events).
type podHalf struct {
	t      testing.TB
	node   string
	c      *containerdtest.Containerd
	admin  kubernetes.Interface
	rt     *remote.Client
	pods   *nodekit.PodHalf
	static string  // the file source's manifest directory
	trace  *tracer // with podHalfOptions.trace
	// criOps has the runtime client's kubelet_runtime_operations_duration_seconds.
	criOps   *prometheus.Registry
	source   *testenv.APICounter
	writes   *testenv.APICounter
	own      *testenv.APICounter
	cancel   context.CancelFunc
	done     chan struct{}
	errsMu   sync.Mutex
	errs     []error
	stopOnce sync.Once
}

type podHalfOptions struct {
	// crashLoopInitial shortens the crash-loop back-off (default the kubelet's).
	crashLoopInitial time.Duration
	// trace wraps the backend's syncer in a tracer and records when the
	// status writer sends a Ready status (podHalf.trace).
	trace bool
	// maxParallel is the engine's MaxParallel (default its default).
	maxParallel int
	// maxPods is the node's pods capacity (default nodestatus's).
	maxPods int
	// cgroupsPerQOS makes pod cgroups as the agent does (its default and
	// the kubelet's), which the usage collector then reads.
	cgroupsPerQOS bool
}

// startPodHalf builds the node's pod half and node half as an agent does
// and runs them until the test ends. Cleanup stops them, checks that
// containerd holds nothing, deletes the Node and checks for leaked
// goroutines.
func startPodHalf(t testing.TB, node string, o podHalfOptions) *podHalf {
	t.Helper()
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	t.Cleanup(leakcheck.Check(t))

	h := &podHalf{t: t, node: node, c: c, static: t.TempDir(),
		source: &testenv.APICounter{}, writes: &testenv.APICounter{}, own: &testenv.APICounter{}}
	var clients []*nodekit.Client
	// The clients' idle connections are closed at the end, before the leak check.
	t.Cleanup(func() {
		for _, c := range clients {
			c.CloseConnections()
		}
	})
	admin := cp.AdminConfig()
	admin.QPS, admin.Burst = 1000, 1000
	var adminTransport http.RoundTripper
	admin.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { adminTransport = rt; return rt }
	var err error
	if h.admin, err = kubernetes.NewForConfig(admin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(adminTransport) })
	client := func(cnt *testenv.APICounter) *nodekit.Client {
		cfg, err := cp.NodeConfig(node)
		if err != nil {
			t.Fatal(err)
		}
		cfg.QPS, cfg.Burst = 1000, 1000
		cfg.WrapTransport = cnt.Wrap
		cl, err := nodekit.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		return cl
	}
	sourceClient, writerClient, nodeClient := client(h.source), client(h.writes), client(h.own)
	api := nodeClient.API()
	api.Pods = func(ns string) nodekit.PodClient {
		if ns == corev1.NamespaceAll {
			return sourceClient.Pods(ns)
		}
		if h.trace != nil {
			return tracedPods{writerClient.Pods(ns), h.trace}
		}
		return writerClient.Pods(ns)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = h.admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })

	h.criOps = prometheus.NewRegistry()
	h.rt, err = remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second, Registerer: h.criOps})
	if err != nil {
		t.Fatal(err)
	}
	podRoot := t.TempDir()
	b := backend.New(backend.Options{
		Syncer: cri.Options{Runtime: h.rt, PodLogRoot: c.PodLogRoot, PodRoot: podRoot, CgroupRoot: c.CgroupRoot,
			ResolvConf: "-", CrashLoopInitial: o.crashLoopInitial, CgroupsPerQOS: o.cgroupsPerQOS},
		Volume: volume.WithClients(volume.Options{}, nodeClient),
		Usage:  usage.Options{RootDir: podRoot},
	})
	build := podsync.BackendFunc(b.Build)
	if o.trace {
		h.trace = newTracer()
		build = func(p podsync.BackendParts) (podsync.Backend, error) {
			be, err := b.Build(p)
			if err != nil {
				return be, err
			}
			h.trace.syncer = be.Syncer.(syncRelister)
			be.Syncer = h.trace
			return be, nil
		}
	}
	status := nodestatus.Options{Runtime: h.rt, MaxPods: o.maxPods}
	tmpl := nodekit.NodeTemplate(node, nil)
	h.pods, err = nodekit.NewPodHalf(nodekit.PodHalfOptions{NodeName: node, API: api, Backend: build,
		ManifestPath: h.static, HostIPs: []string{"127.0.0.1"}, LocalNode: nodekit.LocalNode(tmpl, status), Execer: h.rt,
		Engine: podsync.Options{MaxParallel: o.maxParallel}})
	if err != nil {
		t.Fatal(err)
	}
	nodeHalf, err := nodekit.NewNodeHalf(nodekit.NodeHalfOptions{NodeName: node, API: api, Node: tmpl, Status: status, Pods: h.pods})
	if err != nil {
		t.Fatal(err)
	}
	var g nodekit.Group
	if err := g.AddGroup("pods", h.pods.Group()); err != nil {
		t.Fatal(err)
	}
	if err := g.Add("node", nodeHalf); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		if err := g.Run(runCtx); err != nil {
			h.errsMu.Lock()
			h.errs = append(h.errs, err)
			h.errsMu.Unlock()
		}
	}()
	t.Cleanup(h.stop)
	return h
}

// stop ends every part, then removes and reports whatever is left in
// containerd.
func (h *podHalf) stop() {
	h.stopOnce.Do(func() {
		h.cancel()
		<-h.done
		for _, err := range h.errs {
			h.t.Error(err)
		}
		ctx := context.Background()
		if sbs, err := h.rt.ListPodSandbox(ctx, nil); err == nil && len(sbs) > 0 {
			h.t.Errorf("%d sandboxes left in containerd", len(sbs))
			for _, sb := range sbs {
				_ = h.rt.StopPodSandbox(ctx, sb.Id)
				_ = h.rt.RemovePodSandbox(ctx, sb.Id)
			}
		}
		_ = h.rt.Close()
	})
}

// runtimeEmpty reports whether containerd holds no sandbox and no container.
func (h *podHalf) runtimeEmpty() bool { return h.runtimeHolds(0) }

// runtimeHolds reports whether containerd holds n sandboxes and n
// containers (n one-container pods), no more.
func (h *podHalf) runtimeHolds(n int) bool {
	ctx := context.Background()
	sbs, err1 := h.rt.ListPodSandbox(ctx, nil)
	cs, err2 := h.rt.ListContainers(ctx, nil)
	return err1 == nil && err2 == nil && len(sbs) == n && len(cs) == n
}

// pod is a host-network busybox pod bound to the node running command.
func (h *podHalf) pod(name string, command string) *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: h.node, HostNetwork: true, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: h.c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", command}}}}}
}

func (h *podHalf) create(pod *corev1.Pod) *corev1.Pod {
	h.t.Helper()
	p, err := h.admin.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// waitPod watches the pod until cond holds for it (deleted is true once it
// is gone from the API) or the deadline passes.
func (h *podHalf) waitPod(ns, name, what string, timeout time.Duration, cond func(p *corev1.Pod, deleted bool) bool) *corev1.Pod {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *corev1.Pod
	for ctx.Err() == nil {
		list, err := h.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			continue
		}
		if len(list.Items) == 0 {
			if cond(last, true) {
				return last
			}
		} else {
			last = &list.Items[0]
			if cond(last, false) {
				return last
			}
		}
		w, err := h.admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			last = p
			if cond(p, ev.Type == watch.Deleted) {
				w.Stop()
				return p
			}
		}
		w.Stop()
	}
	h.t.Fatalf("%s: not seen within %v; last %s", what, timeout, describePod(last))
	return nil
}

func describePod(p *corev1.Pod) string {
	if p == nil {
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s phase=%s", p.Name, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " %s{ready=%v restarts=%d %+v}", cs.Name, cs.Ready, cs.RestartCount, cs.State)
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	if p == nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeStatic writes a static pod manifest into the file source's directory.
func (h *podHalf) writeStatic(name, manifest string) {
	h.t.Helper()
	tmp := filepath.Join(h.static, "."+name)
	if err := os.WriteFile(tmp, []byte(manifest), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.static, name)); err != nil {
		h.t.Fatal(err)
	}
}

// removeStatic removes a static pod manifest.
func (h *podHalf) removeStatic(name string) {
	h.t.Helper()
	if err := os.Remove(filepath.Join(h.static, name)); err != nil {
		h.t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// deleteAndWaitGone deletes the pod as an admin with the grace given and
// waits until the writer's final DELETE removed it and containerd is empty.
func (h *podHalf) deleteAndWaitGone(pod *corev1.Pod, grace int64) {
	h.t.Helper()
	if err := h.admin.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		h.t.Fatal(err)
	}
	h.waitPod(pod.Namespace, pod.Name, "pod gone", 60*time.Second, func(_ *corev1.Pod, deleted bool) bool { return deleted })
	testenv.Eventually(h.t, 30*time.Second, 50*time.Millisecond, "containerd empty", h.runtimeEmpty)
}

func TestIntegrationPodReadyHTTP(t *testing.T) {
	h := startPodHalf(t, "podsync-ready", podHalfOptions{})
	port := freePort(t)
	pod := h.pod("web", fmt.Sprintf("mkdir -p /tmp/www && echo ok > /tmp/www/index.html && "+
		"trap 'exit 0' TERM; httpd -f -p 127.0.0.1:%d -h /tmp/www & wait", port))
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/", Port: intstr.FromInt(port)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	h.create(pod)
	p := h.waitPod("default", "web", "Running and Ready", 60*time.Second, func(p *corev1.Pod, _ bool) bool { return podReady(p) })
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || !cs[0].Ready || cs[0].State.Running == nil || p.Status.PodIP != "127.0.0.1" || p.Status.HostIP != "127.0.0.1" {
		t.Errorf("status %s, podIP %q, hostIP %q", describePod(p), p.Status.PodIP, p.Status.HostIP)
	}
	h.deleteAndWaitGone(p, 0)
}

func TestIntegrationLivenessRestart(t *testing.T) {
	h := startPodHalf(t, "podsync-liveness", podHalfOptions{crashLoopInitial: time.Second})
	// Healthy for 1s after each start, then the probe fails.
	pod := h.pod("flaky", "touch /tmp/healthy; (sleep 1; rm /tmp/healthy) & trap 'exit 0' TERM; sleep 3600 & wait")
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/healthy"}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	h.create(pod)
	p := h.waitPod("default", "flaky", "restartCount 2", 90*time.Second, func(p *corev1.Pod, _ bool) bool {
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil {
		t.Errorf("no last termination state: %s", describePod(p))
	}
	h.deleteAndWaitGone(p, 0)
}

func TestIntegrationGracefulDelete(t *testing.T) {
	h := startPodHalf(t, "podsync-graceful", podHalfOptions{})
	// Ready once the trap is set: a shell that is PID 1 ignores TERM until
	// then, and the deletion would wait out the grace period.
	pod := h.pod("graceful", "trap 'exit 0' TERM; touch /tmp/trapped; sleep 3600 & wait")
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/trapped"}}}}
	h.create(pod)
	p := h.waitPod("default", "graceful", "Running", 60*time.Second, func(p *corev1.Pod, _ bool) bool { return podReady(p) })
	uid := p.UID
	if err := h.admin.CoreV1().Pods("default").Delete(context.Background(), "graceful",
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(30))}); err != nil {
		t.Fatal(err)
	}
	var terminal *corev1.Pod
	start := time.Now()
	h.waitPod("default", "graceful", "terminal status, then gone", 60*time.Second, func(p *corev1.Pod, deleted bool) bool {
		if p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && terminal == nil {
			terminal = p.DeepCopy()
		}
		return deleted
	})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("deletion took %v: the container's TERM handler should end it well within the 30s grace", took)
	}
	if terminal == nil {
		t.Fatal("no terminal phase seen before the pod was deleted")
	}
	if cs := terminal.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("terminal status %s", describePod(terminal))
	}
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "containerd empty", h.runtimeEmpty)
	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "pod forgotten", func() bool {
		_, ok := h.pods.Engine().PodLifecycle(uid)
		return !ok
	})
}

func TestIntegrationStaticPodMirror(t *testing.T) {
	h := startPodHalf(t, "podsync-static", podHalfOptions{})
	h.writeStatic("static.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: static
  namespace: default
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`, h.c.BusyboxImage))
	name := "static-" + h.node
	p := h.waitPod("default", name, "mirror pod Running", 60*time.Second, func(p *corev1.Pod, _ bool) bool {
		return p != nil && podsource.IsMirrorPod(p) && podReady(p)
	})
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil {
		t.Errorf("mirror pod status %s", describePod(p))
	}
	h.removeStatic("static.yaml")
	h.waitPod("default", name, "mirror pod deleted", 60*time.Second, func(_ *corev1.Pod, deleted bool) bool { return deleted })
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "containerd empty", h.runtimeEmpty)
}
