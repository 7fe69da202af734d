package cri

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/remote"
)

// The status writer is the podsync.Engine's StatusWriter.
var _ podsync.StatusWriter = (*status.Writer)(nil)

// apiCounter counts the requests a client sends, the bytes of their bodies
// and the bytes of the responses (watch streams included).
type apiCounter struct {
	next          http.RoundTripper
	requests      atomic.Int64
	requestBytes  atomic.Int64
	responseBytes atomic.Int64
	mu            sync.Mutex
	verbs         map[string]int
}

func (c *apiCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	if req.ContentLength > 0 {
		c.requestBytes.Add(req.ContentLength)
	}
	verb := req.Method
	if req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	c.mu.Lock()
	if c.verbs == nil {
		c.verbs = map[string]int{}
	}
	c.verbs[verb]++
	c.mu.Unlock()
	resp, err := c.next.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.responseBytes}
	}
	return resp, err
}

// apiCount is a snapshot of an apiCounter.
type apiCount struct {
	requests, requestBytes, responseBytes int64
	verbs                                 map[string]int
}

func (c *apiCounter) snapshot() apiCount {
	c.mu.Lock()
	verbs := map[string]int{}
	for k, v := range c.verbs {
		verbs[k] = v
	}
	c.mu.Unlock()
	return apiCount{c.requests.Load(), c.requestBytes.Load(), c.responseBytes.Load(), verbs}
}

func (a apiCount) sub(b apiCount) apiCount {
	d := apiCount{a.requests - b.requests, a.requestBytes - b.requestBytes, a.responseBytes - b.responseBytes, map[string]int{}}
	for k, v := range a.verbs {
		if v-b.verbs[k] != 0 {
			d.verbs[k] = v - b.verbs[k]
		}
	}
	return d
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// podHalf is the whole pod half of a node on the real containerd and the
// test control plane, as system:node:<name>: podsource's API and file
// sources through a Merger and MirrorPods, a podsync podsync.Engine on the CRI
// syncer with a probe.Manager, and a status.Writer.
type podHalf struct {
	t        testing.TB
	node     string
	c        *containerdtest.Containerd
	admin    kubernetes.Interface
	rt       *remote.Client
	eng      *podsync.Engine
	writer   *status.Writer
	static   string // the file source's manifest directory
	trace    *tracer
	source   *apiCounter
	writes   *apiCounter
	mirror   *apiCounter
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	errsMu   sync.Mutex
	errs     []error
	stopOnce sync.Once
}

type podHalfOptions struct {
	// crashLoopInitial shortens the crash-loop back-off (default the kubelet's).
	crashLoopInitial time.Duration
	// trace wraps the syncer and the writer in a tracer (podHalf.trace).
	trace bool
	// maxParallel is the podsync.Engine's MaxParallel (default its default).
	maxParallel int
}

// startPodHalf registers the Node as the node itself and starts every part.
// Cleanup stops them, checks that containerd holds nothing, deletes the Node
// and checks for leaked goroutines.
func startPodHalf(t testing.TB, node string, o podHalfOptions) *podHalf {
	t.Helper()
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	t.Cleanup(leakcheck.Check(t))

	h := &podHalf{t: t, node: node, c: c, static: t.TempDir(),
		source: &apiCounter{}, writes: &apiCounter{}, mirror: &apiCounter{}}
	var transports []http.RoundTripper
	// The clients' idle connections are closed at the end, before the leak check.
	t.Cleanup(func() {
		for _, rt := range transports {
			utilnet.CloseIdleConnectionsFor(rt)
		}
	})
	adminCfg := cp.AdminConfig()
	adminCfg.QPS, adminCfg.Burst = 1000, 1000
	adminCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { transports = append(transports, rt); return rt }
	var err error
	if h.admin, err = kubernetes.NewForConfig(adminCfg); err != nil {
		t.Fatal(err)
	}
	client := func(cnt *apiCounter) kubernetes.Interface {
		cfg, err := cp.NodeConfig(node)
		if err != nil {
			t.Fatal(err)
		}
		cfg.QPS, cfg.Burst = 1000, 1000
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			transports = append(transports, rt)
			cnt.next = rt
			return cnt
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	sourceClient, writerClient, mirrorClient := client(h.source), client(h.writes), client(h.mirror)
	ctx := context.Background()
	if _, err := mirrorClient.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })

	h.rt, err = remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	prober, err := probe.NewHandlers(probe.HandlerOptions{Execer: h.rt})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := probe.New(probe.Options{Prober: prober, NoStartJitter: true})
	if err != nil {
		t.Fatal(err)
	}
	cri, err := New(Options{Runtime: h.rt, Probes: pm, PodLogRoot: c.PodLogRoot, PodRoot: t.TempDir(), CgroupRoot: c.CgroupRoot,
		ResolvConf: "-", NodeName: node, HostIPs: []string{"127.0.0.1"}, CrashLoopInitial: o.crashLoopInitial})
	if err != nil {
		t.Fatal(err)
	}
	api, err := podsource.NewAPI(podsource.APIOptions{Pods: sourceClient.CoreV1().Pods(""), NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	file, err := podsource.NewFile(podsource.FileOptions{Path: h.static, NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	merger, err := podsource.NewMerger(podsource.MergerOptions{Sources: []podsource.PodSource{api, file}})
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := podsource.NewMirrorPods(podsource.MirrorPodsOptions{NodeName: node, Nodes: mirrorClient.CoreV1().Nodes(),
		Pods:       func(ns string) podsource.MirrorPodClient { return mirrorClient.CoreV1().Pods(ns) },
		StaticPods: merger.StaticPods, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.writer, err = status.New(status.Options{Pods: func(ns string) status.PodClient { return writerClient.CoreV1().Pods(ns) }})
	if err != nil {
		t.Fatal(err)
	}
	var syncer interface {
		podsync.PodSyncer
		podsync.Relister
	} = cri
	var writer podsync.StatusWriter = h.writer
	if o.trace {
		h.trace = newTracer(cri, h.writer)
		syncer, writer = h.trace, h.trace
	}
	h.eng, err = podsync.New(podsync.Options{Syncer: syncer, Writer: writer, Probes: pm, Updates: merger.Updates(),
		Sources: []string{api.Name(), file.Name()}, HostIPs: []string{"127.0.0.1"}, MaxParallel: o.maxParallel})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	for name, run := range map[string]func(context.Context) error{
		"merger": merger.Run, "mirror pods": mirrors.Run, "status writer": h.writer.Run, "probes": pm.Run, "engine": h.eng.Run,
	} {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			if err := run(runCtx); err != nil {
				h.errsMu.Lock()
				h.errs = append(h.errs, fmt.Errorf("%s: %w", name, err))
				h.errsMu.Unlock()
			}
		}()
	}
	t.Cleanup(h.stop)
	return h
}

// stop ends every part, then removes and reports whatever is left in
// containerd.
func (h *podHalf) stop() {
	h.stopOnce.Do(func() {
		h.cancel()
		h.wg.Wait()
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
func (h *podHalf) runtimeEmpty() bool {
	ctx := context.Background()
	sbs, err1 := h.rt.ListPodSandbox(ctx, nil)
	cs, err2 := h.rt.ListContainers(ctx, nil)
	return err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0
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

// tracer wraps the syncer and the status writer and records, per pod name,
// when its first SyncPod began and ended and when a Running and Ready
// status was handed to the writer; and the relists' durations.
type tracer struct {
	syncer interface {
		podsync.PodSyncer
		podsync.Relister
	}
	writer podsync.StatusWriter

	mu        sync.Mutex
	syncStart map[string]time.Time
	syncEnd   map[string]time.Time
	readySet  map[string]time.Time
	relists   []time.Duration
	stopping  []time.Duration // SyncTerminatingPod
	removing  []time.Duration // SyncTerminatedPod
}

func newTracer(s interface {
	podsync.PodSyncer
	podsync.Relister
}, w podsync.StatusWriter) *tracer {
	return &tracer{syncer: s, writer: w, syncStart: map[string]time.Time{}, syncEnd: map[string]time.Time{}, readySet: map[string]time.Time{}}
}

func (tr *tracer) SyncPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState) (podsync.SyncResult, error) {
	start := time.Now()
	res, err := tr.syncer.SyncPod(ctx, pod, observed)
	tr.mu.Lock()
	if _, ok := tr.syncStart[pod.Name]; !ok {
		tr.syncStart[pod.Name], tr.syncEnd[pod.Name] = start, time.Now()
	}
	tr.mu.Unlock()
	return res, err
}

func (tr *tracer) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState, grace time.Duration) error {
	start := time.Now()
	err := tr.syncer.SyncTerminatingPod(ctx, pod, observed, grace)
	tr.mu.Lock()
	tr.stopping = append(tr.stopping, time.Since(start))
	tr.mu.Unlock()
	return err
}

func (tr *tracer) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod, observed *podsync.PodState) error {
	start := time.Now()
	err := tr.syncer.SyncTerminatedPod(ctx, pod, observed)
	tr.mu.Lock()
	tr.removing = append(tr.removing, time.Since(start))
	tr.mu.Unlock()
	return err
}

func (tr *tracer) Relist(ctx context.Context) (map[types.UID]*podsync.PodState, error) {
	start := time.Now()
	pods, err := tr.syncer.Relist(ctx)
	tr.mu.Lock()
	tr.relists = append(tr.relists, time.Since(start))
	tr.mu.Unlock()
	return pods, err
}

func (tr *tracer) SetPodStatus(pod *corev1.Pod, s corev1.PodStatus) {
	p := &corev1.Pod{Status: s}
	p.Status.Phase = s.Phase
	if podReady(p) {
		tr.mu.Lock()
		if _, ok := tr.readySet[pod.Name]; !ok {
			tr.readySet[pod.Name] = time.Now()
		}
		tr.mu.Unlock()
	}
	tr.writer.SetPodStatus(pod, s)
}

func (tr *tracer) PodTerminated(pod *corev1.Pod) { tr.writer.PodTerminated(pod) }
func (tr *tracer) RemovePod(uid types.UID)       { tr.writer.RemovePod(uid) }
