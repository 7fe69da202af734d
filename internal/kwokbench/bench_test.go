//go:build linux

// Package kwokbench measures the same pod workload on kwok v0.8.0 and on
// examples/fleet's hollow nodes (--pods default, kwok's default stages
// played by podsync/podsynctest), one after the other, each on a test
// control plane of its own, and prints a table of both with their ratio
// (fleet/kwok).
//
// It runs only with NODEKIT_BENCH=1 (and never under -short);
// hack/bench-vs-kwok.sh builds the binaries, sets it and passes the knobs:
//
//	KWOK_BENCH_WORKLOADS  NODESxPODS,... (1000x10000,100x10000)
//	KWOK_BENCH_HOLD       how long all pods stay Running (60s)
//	KWOK_BENCH_CLIENTS    goroutines creating and deleting the pods (32)
//	KWOK_BENCH_SIMS       simulators, in order (kwok,fleet)
//	KWOK_BENCH_TIMEOUT    the whole run (100m)
//	KWOK_BENCH_PHASE_TIMEOUT  each wait: nodes Ready, pods Ready, pods gone (10m)
//	KWOK_BIN_DIR          kwok and its stages.yaml (hack/kwokbin.sh)
//	KWOK_BENCH_KWOK_ARGS, KWOK_BENCH_FLEET_ARGS  more flags for each
//	                      simulator, blank-separated (--cpuprofile=F for the fleet)
//	KWOK_BENCH_LOG_DIR    keep the simulators' logs there (default: a
//	                      temporary directory, removed at the end)
//
// For each workload and each simulator: the simulator starts as a process
// (kwok with its default stages, managing the nodes that carry its
// annotation, which the driver creates; the fleet registering its own), the
// driver waits for the N nodes to be Ready, creates P pods bound round-robin
// to them (spec.nodeName set) with KWOK_BENCH_CLIENTS goroutines and no
// client-side rate limit, and times each from just before its Create to
// the moment a watch opened before the creates sees it Running and Ready.
// It holds them for KWOK_BENCH_HOLD, sampling the simulator's memory, then
// deletes each (default grace period) and times it until the watch sees it
// DELETED. Then the simulator is stopped, its nodes and leases deleted (and
// checked gone), and the control plane stopped: the next run starts a new
// one, on an empty etcd. kube-apiserver runs with its in-flight limits and
// priority and fairness off, as kwok's own benchmark runs it.
package kwokbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

const (
	namespace = "kwokbench"
	// kwokAnnotation marks the nodes kwok manages (kwokctl's and kwok's
	// benchmark's nodes carry it; kwok is started with the matching
	// --manage-nodes-with-annotation-selector).
	kwokAnnotation = "kwok.x-k8s.io/node"
	kwokPrefix     = "kwok-node-"
	fleetPrefix    = "fleet-node-"
	podPrefix      = "bench-"
	// stopGrace is how long a simulator has to exit after SIGTERM.
	stopGrace = 10 * time.Second
)

type workload struct{ nodes, pods int }

func (w workload) String() string { return fmt.Sprintf("%dx%d", w.nodes, w.pods) }

// maxPods is each node's pods capacity: twice its share, 110 at least.
func (w workload) maxPods() int {
	return max(110, 2*((w.pods+w.nodes-1)/w.nodes))
}

type knobs struct {
	workloads    []workload
	hold         time.Duration
	clients      int
	sims         []string
	timeout      time.Duration
	phaseTimeout time.Duration
	kwokDir      string
	logDir       string
	extraArgs    map[string][]string // by simulator
}

func loadKnobs(t *testing.T) knobs {
	t.Helper()
	k := knobs{}
	var err error
	spec := os.Getenv("KWOK_BENCH_WORKLOADS")
	if spec == "" {
		spec = "1000x10000,100x10000"
	}
	for _, s := range strings.Split(spec, ",") {
		n, p, ok := strings.Cut(strings.TrimSpace(s), "x")
		nodes, err1 := strconv.Atoi(n)
		pods, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || nodes < 1 || pods < 1 {
			t.Fatalf("KWOK_BENCH_WORKLOADS=%q: want NODESxPODS,... (such as 1000x10000)", spec)
		}
		k.workloads = append(k.workloads, workload{nodes, pods})
	}
	if k.hold, err = testenv.EnvDuration("KWOK_BENCH_HOLD", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if k.clients, err = testenv.EnvInt("KWOK_BENCH_CLIENTS", 32); err != nil {
		t.Fatal(err)
	}
	if k.timeout, err = testenv.EnvDuration("KWOK_BENCH_TIMEOUT", 100*time.Minute); err != nil {
		t.Fatal(err)
	}
	if k.phaseTimeout, err = testenv.EnvDuration("KWOK_BENCH_PHASE_TIMEOUT", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	sims := os.Getenv("KWOK_BENCH_SIMS")
	if sims == "" {
		sims = "kwok,fleet"
	}
	for _, s := range strings.Split(sims, ",") {
		switch s = strings.TrimSpace(s); s {
		case "kwok", "fleet":
			k.sims = append(k.sims, s)
		default:
			t.Fatalf("KWOK_BENCH_SIMS=%q: want kwok and/or fleet", sims)
		}
	}
	k.kwokDir = os.Getenv("KWOK_BIN_DIR")
	k.logDir = os.Getenv("KWOK_BENCH_LOG_DIR")
	k.extraArgs = map[string][]string{
		"kwok":  strings.Fields(os.Getenv("KWOK_BENCH_KWOK_ARGS")),
		"fleet": strings.Fields(os.Getenv("KWOK_BENCH_FLEET_ARGS")),
	}
	return k
}

// TestBenchVsKwok prints, for each workload, a table of kwok's and the
// fleet's figures. It asserts nothing about them.
func TestBenchVsKwok(t *testing.T) {
	if testing.Short() {
		t.Skip("a benchmark: not in -short mode")
	}
	if os.Getenv("NODEKIT_BENCH") != "1" {
		t.Skip("set NODEKIT_BENCH=1 (hack/bench-vs-kwok.sh) to measure kwok and the fleet side by side")
	}
	k := loadKnobs(t)
	fmt.Printf("load average at start: %s (%d CPUs)\n", testenv.LoadAvg(), goruntime.NumCPU())

	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	dir := t.TempDir()
	b := &bench{t: t, k: k, dir: dir}
	for _, s := range k.sims {
		switch s {
		case "kwok":
			if k.kwokDir == "" {
				t.Fatal("KWOK_BIN_DIR is not set: run hack/bench-vs-kwok.sh (it builds kwok with hack/kwokbin.sh)")
			}
			for _, f := range []string{"kwok", "stages.yaml"} {
				if _, err := os.Stat(filepath.Join(k.kwokDir, f)); err != nil {
					t.Fatalf("KWOK_BIN_DIR: %v (hack/kwokbin.sh builds it)", err)
				}
			}
		case "fleet":
			b.fleetBin = buildFleet(t, dir)
		}
	}
	for _, w := range k.workloads {
		results := map[string]*result{}
		for _, s := range k.sims {
			// Each run on a control plane of its own: a run after
			// another on the same etcd and API server found them
			// slower (10,000 pods just deleted), whichever simulator
			// came second.
			stop := b.startControlPlane(ctx)
			results[s] = b.run(ctx, s, w)
			stop()
		}
		printTable(w, k, results)
	}
	fmt.Printf("load average at end: %s\n", testenv.LoadAvg())
}

// startControlPlane starts a control plane for one run (kube-apiserver
// with its in-flight limits and priority and fairness off, as kwok's own
// benchmark runs it), writes its admin kubeconfig for the simulator and
// creates the benchmark's namespace; the function it returns stops it.
func (b *bench) startControlPlane(ctx context.Context) (stop func()) {
	t := b.t
	t.Helper()
	cp, err := controlplane.Start(ctx, controlplane.Options{ExtraAPIServerArgs: map[string]string{
		"max-requests-inflight":          "0",
		"max-mutating-requests-inflight": "0",
		"enable-priority-and-fairness":   "false",
	}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			if err := cp.Stop(); err != nil {
				t.Errorf("stopping the control plane: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.AdminConfig(), kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfg := cp.AdminConfig()
	cfg.QPS = -1 // no client-side limit
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "nodekit-kwokbench"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.cp, b.client, b.kubeconfig = cp, client, kubeconfig
	return stop
}

// buildFleet builds examples/fleet into dir, with the flags kwok is built
// with, and returns the binary's path.
func buildFleet(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "fleet")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "github.com/nodekit/nodekit/examples/fleet")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/fleet: %v\n%s", err, out)
	}
	return bin
}

type bench struct {
	t          *testing.T
	k          knobs
	cp         *controlplane.ControlPlane
	client     kubernetes.Interface
	kubeconfig string
	dir        string
	fleetBin   string
}

// result is one simulator's figures for one workload.
type result struct {
	nodesReady             time.Duration // simulator start to N nodes Ready
	allReady               time.Duration // first create to the last pod Ready
	readyLat               []time.Duration
	allGone                time.Duration // first delete to the last pod gone
	goneLat                []time.Duration
	simCPU                 [3]float64 // seconds: create to Ready, hold, delete to gone
	apiCPU                 [3]float64
	rssEnd, rssMax, rssHWM int64    // bytes: VmRSS at the end of the hold, the largest sample, VmHWM
	rssFifth               int64    // bytes: VmRSS sampled once a fifth of the hold had passed (minute 2 of 10)
	leases                 int      // leases in kube-node-lease at the end of the hold
	updates                [2]int64 // pod MODIFIED events the watch saw: creates to the delete phase, then after
}

const (
	spanCreate = iota
	spanHold
	spanDelete
)

// run measures one simulator on one workload and leaves the cluster empty.
func (b *bench) run(ctx context.Context, sim string, w workload) *result {
	t := b.t
	r := &result{}
	logf := func(format string, args ...any) {
		t.Logf("%s %s %v: %s", time.Now().Format("15:04:05.000"), sim, w, fmt.Sprintf(format, args...))
	}
	prefix := kwokPrefix
	if sim == "fleet" {
		prefix = fleetPrefix
	}
	nodes := make([]string, w.nodes)
	for i := range nodes {
		nodes[i] = prefix + strconv.Itoa(i)
	}

	logf("starting")
	started := time.Now()
	var p *proc
	switch sim {
	case "kwok":
		p = b.start(t, "kwok", filepath.Join(b.k.kwokDir, "kwok"),
			"--kubeconfig="+b.kubeconfig,
			"--config="+filepath.Join(b.k.kwokDir, "stages.yaml"),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector="+kwokAnnotation+"=fake",
			// kwokctl's default, and the fleet's lease duration: with
			// none kwok writes no leases.
			"--node-lease-duration-seconds=40")
		b.createKWOKNodes(ctx, nodes, w.maxPods())
	case "fleet":
		p = b.start(t, "fleet", b.fleetBin,
			"--kubeconfig="+b.kubeconfig,
			"--nodes="+strconv.Itoa(w.nodes),
			"--prefix="+fleetPrefix,
			"--pods=default",
			"--max-pods="+strconv.Itoa(w.maxPods()),
			"--qps=0",
			"--print-every=1h",
			// The fleet's own lease check lists every lease: not part
			// of a simulator's work.
			"--verify-every=0")
	}
	defer b.cleanup(ctx, p, prefix)

	b.waitNodesReady(ctx, p, nodes)
	r.nodesReady = time.Since(started)
	logf("%d nodes Ready after %v", w.nodes, r.nodesReady.Round(time.Millisecond))

	// One watch of the namespace's pods, from before the first create.
	list, err := b.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d pods left in %s before the run", len(list.Items), namespace)
	}
	tr := newTracker(w.pods)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	rw, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return b.client.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Stop()
	go tr.consume(rw.ResultChan())

	// Create.
	apiPID := b.cp.APIServerPID()
	sim0, api0 := cpuSeconds(t, p.pid()), cpuSeconds(t, apiPID)
	logf("creating %d pods", w.pods)
	tr.base = time.Now()
	b.parallel(ctx, w.pods, func(i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podPrefix + strconv.Itoa(i), Namespace: namespace},
			Spec: corev1.PodSpec{
				NodeName:   nodes[i%len(nodes)],
				Containers: []corev1.Container{{Name: "c", Image: "registry.local/pause:1"}},
			},
		}
		tr.created[i].Store(int64(time.Since(tr.base)))
		_, err := b.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	b.await(ctx, p, tr.allReady, "all pods Running and Ready", tr.progress)
	sim1, api1 := cpuSeconds(t, p.pid()), cpuSeconds(t, apiPID)
	r.allReady = time.Duration(tr.lastReady.Load())
	for i := range w.pods {
		r.readyLat = append(r.readyLat, time.Duration(tr.ready[i].Load()-tr.created[i].Load()))
	}
	logf("all %d pods Ready %v after the first create", w.pods, r.allReady.Round(time.Millisecond))

	// Hold.
	holdEnd := time.Now().Add(b.k.hold)
	tick := time.NewTicker(time.Second)
	end := time.NewTimer(b.k.hold)
	defer end.Stop()
	fifth := time.Now().Add(b.k.hold / 5)
	for time.Now().Before(holdEnd) {
		if rss, err := testenv.ProcRSS(p.pid()); err == nil {
			r.rssMax = max(r.rssMax, rss)
			if r.rssFifth == 0 && !time.Now().Before(fifth) {
				r.rssFifth = rss
			}
		}
		select {
		case <-tick.C:
		case <-end.C:
		case <-p.done:
			tick.Stop()
			t.Fatalf("%s exited during the hold; its log ends with:\n%s", p.name, p.tail(40))
		case <-ctx.Done():
			tick.Stop()
			t.Fatalf("during the hold: %v", ctx.Err())
		}
	}
	tick.Stop()
	sim2, api2 := cpuSeconds(t, p.pid()), cpuSeconds(t, apiPID)
	if r.rssEnd, err = testenv.ProcRSS(p.pid()); err != nil {
		t.Fatal(err)
	}
	r.rssMax = max(r.rssMax, r.rssEnd)
	if r.rssFifth == 0 {
		r.rssFifth = r.rssEnd // a hold too short to sample within
	}
	if r.rssHWM, err = testenv.ProcHWM(p.pid()); err != nil {
		t.Fatal(err)
	}
	leases, err := b.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.leases = len(leases.Items)
	if n := tr.notReady(); n != 0 {
		t.Errorf("%s %v: %d pods no longer Running and Ready at the end of the hold", sim, w, n)
	}

	// Delete.
	logf("deleting %d pods", w.pods)
	tr.delBase = time.Now()
	tr.deletePhase.Store(true)
	b.parallel(ctx, w.pods, func(i int) error {
		tr.deleting[i].Store(int64(time.Since(tr.delBase)))
		return b.client.CoreV1().Pods(namespace).Delete(ctx, podPrefix+strconv.Itoa(i), metav1.DeleteOptions{})
	})
	b.await(ctx, p, tr.allGone, "all pods gone", tr.progress)
	sim3, api3 := cpuSeconds(t, p.pid()), cpuSeconds(t, apiPID)
	r.allGone = time.Duration(tr.lastGone.Load())
	for i := range w.pods {
		r.goneLat = append(r.goneLat, time.Duration(tr.gone[i].Load()-tr.deleting[i].Load()))
	}
	logf("all %d pods gone %v after the first delete", w.pods, r.allGone.Round(time.Millisecond))
	if err := tr.err(); err != nil {
		t.Fatal(err)
	}

	r.simCPU = [3]float64{sim1 - sim0, sim2 - sim1, sim3 - sim2}
	r.apiCPU = [3]float64{api1 - api0, api2 - api1, api3 - api2}
	r.updates = [2]int64{tr.modified[0].Load(), tr.modified[1].Load()}
	return r
}

// tracker follows the benchmark's pods through one watch. Times are
// nanoseconds since base (creates, Ready) or delBase (deletes, gone); 0 is
// not yet.
type tracker struct {
	base, delBase                    time.Time
	created, ready, deleting, gone   []atomic.Int64
	readyCount, goneCount, lastReady atomic.Int64
	lastGone                         atomic.Int64
	allReady, allGone                chan struct{}
	readyOnce, goneOnce              sync.Once
	mu                               sync.Mutex
	firstErr                         error
	nowReady                         []atomic.Bool // Running and Ready at the last event seen
	total                            int
	unexpected                       atomic.Int64
	deletePhase                      atomic.Bool
	modified                         [2]atomic.Int64 // MODIFIED events before and after deletePhase
}

func newTracker(n int) *tracker {
	return &tracker{
		created: make([]atomic.Int64, n), ready: make([]atomic.Int64, n),
		deleting: make([]atomic.Int64, n), gone: make([]atomic.Int64, n),
		nowReady: make([]atomic.Bool, n),
		allReady: make(chan struct{}), allGone: make(chan struct{}),
		total: n,
	}
}

func (tr *tracker) consume(events <-chan watch.Event) {
	for ev := range events {
		if ev.Type == watch.Error {
			tr.fail(fmt.Errorf("pod watch: %v", apierrors.FromObject(ev.Object)))
			continue
		}
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		i, ok := podIndex(pod.Name, tr.total)
		if !ok {
			tr.unexpected.Add(1)
			continue
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			if ev.Type == watch.Modified {
				if tr.deletePhase.Load() {
					tr.modified[1].Add(1)
				} else {
					tr.modified[0].Add(1)
				}
			}
			ready := runningAndReady(pod)
			tr.nowReady[i].Store(ready)
			if ready && tr.ready[i].Load() == 0 {
				at := int64(time.Since(tr.base))
				if tr.ready[i].CompareAndSwap(0, at) {
					tr.lastReady.Store(at)
					if tr.readyCount.Add(1) == int64(tr.total) {
						tr.readyOnce.Do(func() { close(tr.allReady) })
					}
				}
			}
		case watch.Deleted:
			tr.nowReady[i].Store(false)
			at := int64(time.Since(tr.delBase))
			if tr.gone[i].CompareAndSwap(0, at) {
				tr.lastGone.Store(at)
				if tr.goneCount.Add(1) == int64(tr.total) {
					tr.goneOnce.Do(func() { close(tr.allGone) })
				}
			}
		}
	}
}

func (tr *tracker) fail(err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.firstErr == nil {
		tr.firstErr = err
	}
}

func (tr *tracker) err() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.firstErr
}

func (tr *tracker) notReady() int {
	n := 0
	for i := range tr.nowReady {
		if !tr.nowReady[i].Load() {
			n++
		}
	}
	return n
}

func (tr *tracker) progress() string {
	return fmt.Sprintf("%d of %d Ready, %d of %d gone; watch error: %v", tr.readyCount.Load(), tr.total, tr.goneCount.Load(), tr.total, tr.err())
}

func podIndex(name string, n int) (int, bool) {
	s, ok := strings.CutPrefix(name, podPrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0 && i < n
}

func runningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// parallel runs f(0..n-1) on the knob's number of goroutines and fails the
// test with the first error.
func (b *bench) parallel(ctx context.Context, n int, f func(i int) error) {
	b.t.Helper()
	next := atomic.Int64{}
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range b.k.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = fmt.Errorf("item %d: %w", i, err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		b.t.Fatal(first)
	}
}

// await waits for done within the phase timeout, failing the test when the
// simulator exits or the time is up.
func (b *bench) await(ctx context.Context, p *proc, done <-chan struct{}, what string, progress func() string) {
	b.t.Helper()
	timer := time.NewTimer(b.k.phaseTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-p.done:
		b.t.Fatalf("%s exited before %s (%s); its log ends with:\n%s", p.name, what, progress(), p.tail(40))
	case <-timer.C:
		b.t.Fatalf("%s: not within %v (%s); %s's log ends with:\n%s", what, b.k.phaseTimeout, progress(), p.name, p.tail(40))
	case <-ctx.Done():
		b.t.Fatalf("%s: %v (%s)", what, ctx.Err(), progress())
	}
}

// createKWOKNodes creates the nodes kwok is to manage, as kwok's own
// benchmark writes them (its annotation and labels, capacity in the
// status), with the knob's number of goroutines.
func (b *bench) createKWOKNodes(ctx context.Context, names []string, maxPods int) {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	b.parallel(ctx, len(names), func(i int) error {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: names[i],
				Annotations: map[string]string{
					kwokAnnotation:                 "fake",
					"node.alpha.kubernetes.io/ttl": "0",
				},
				Labels: map[string]string{
					"beta.kubernetes.io/arch":       "amd64",
					"beta.kubernetes.io/os":         "linux",
					"kubernetes.io/arch":            "amd64",
					"kubernetes.io/os":              "linux",
					"kubernetes.io/hostname":        names[i],
					"kubernetes.io/role":            "agent",
					"node-role.kubernetes.io/agent": "",
					"type":                          "kwok",
				},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		_, err := b.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
}

// waitNodesReady watches the nodes until every one of names is Ready.
func (b *bench) waitNodesReady(ctx context.Context, p *proc, names []string) {
	b.t.Helper()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	ready := map[string]bool{}
	wctx, cancel := context.WithTimeout(ctx, b.k.phaseTimeout)
	defer cancel()
	go func() {
		// The simulator exiting ends the wait at once.
		select {
		case <-p.done:
			cancel()
		case <-wctx.Done():
		}
	}()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return b.client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return b.client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(wctx, lw, &corev1.Node{}, nil, func(ev watch.Event) (bool, error) {
		n, ok := ev.Object.(*corev1.Node)
		if !ok || !want[n.Name] {
			return false, nil
		}
		if ev.Type != watch.Deleted && nodeReady(n) {
			ready[n.Name] = true
		} else {
			delete(ready, n.Name)
		}
		return len(ready) == len(want), nil
	})
	if err != nil {
		if pe := p.exitErr(); pe != nil {
			b.t.Fatalf("%s exited before its nodes were Ready (%d of %d): %v; its log ends with:\n%s", p.name, len(ready), len(want), pe, p.tail(40))
		}
		b.t.Fatalf("nodes Ready: %d of %d within %v: %v; %s's log ends with:\n%s", len(ready), len(want), b.k.phaseTimeout, err, p.name, p.tail(40))
	}
}

// cleanup stops the simulator and deletes every pod of the namespace and
// every node and lease with prefix, then checks that none is left.
func (b *bench) cleanup(ctx context.Context, p *proc, prefix string) {
	t := b.t
	if err := p.stop(); err != nil {
		t.Errorf("stopping %s: %v", p.name, err)
	}
	t.Logf("%s stopped (%v); its log (%s) ends with:\n%s", p.name, p.err, p.logPath, p.tail(3))
	zero := int64(0)
	if err := b.client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the pods: %v", err)
	}
	nodes, err := b.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing the nodes: %v", err)
		return
	}
	leases, err := b.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing the leases: %v", err)
		return
	}
	var names []string
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, prefix) {
			names = append(names, n.Name)
		}
	}
	var leaseNames []string
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, prefix) {
			leaseNames = append(leaseNames, l.Name)
		}
	}
	next := atomic.Int64{}
	var wg sync.WaitGroup
	var errs atomic.Int64
	for range b.k.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				var err error
				switch {
				case i < len(names):
					err = b.client.CoreV1().Nodes().Delete(ctx, names[i], metav1.DeleteOptions{})
				case i < len(names)+len(leaseNames):
					err = b.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, leaseNames[i-len(names)], metav1.DeleteOptions{})
				default:
					return
				}
				if err != nil && !apierrors.IsNotFound(err) {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := errs.Load(); n != 0 {
		t.Errorf("%d node and lease deletes failed", n)
	}
	// Nothing has finalizers: what was deleted is gone at once.
	left := 0
	if l, err := b.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		left += len(l.Items)
	}
	if l, err := b.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		left += len(l.Items)
	}
	var ll *coordinationv1.LeaseList
	if ll, err = b.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{}); err == nil {
		left += len(ll.Items)
	}
	if left != 0 {
		t.Errorf("after %s: %d pods, nodes and leases left", p.name, left)
	}
}

// cpuSeconds returns utime+stime of pid in seconds.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	ticks, err := testenv.ProcCPUTicks(pid)
	if err != nil {
		t.Fatalf("CPU of pid %d: %v", pid, err)
	}
	return float64(ticks) / testenv.TicksPerSecond
}

// proc is a simulator process, its output in a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once it has exited and been reaped
	err     error         // cmd.Wait's result, set before done is closed
}

// start starts bin and stops it when the test ends. The goroutine that
// starts it stays locked to its OS thread until it has been reaped: the
// child gets SIGKILL when that thread ends (so when the test binary dies).
func (b *bench) start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	logDir := b.dir
	if b.k.logDir != "" {
		logDir = b.k.logDir
	}
	logPath := filepath.Join(logDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, logPath: logPath, done: make(chan struct{})}
	args = append(args, b.k.extraArgs[name]...)
	t.Logf("%s %s", bin, strings.Join(args, " "))
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		defer close(p.done)
		defer log.Close()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
	}()
	if err := <-started; err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("stopping %s: %v", name, err)
		}
	})
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exitErr returns why the process exited, or nil while it runs.
func (p *proc) exitErr() error {
	select {
	case <-p.done:
		if p.err == nil {
			return errors.New("exited with status 0")
		}
		return p.err
	default:
		return nil
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the exit.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	timer.Reset(stopGrace)
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("pid %d did not exit within %v of SIGKILL", p.pid(), stopGrace)
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 16<<10 {
		_, _ = f.Seek(-16<<10, io.SeekEnd)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// printTable prints one Markdown table for workload w: a row per figure,
// a column per simulator, and fleet/kwok when both ran.
func printTable(w workload, k knobs, results map[string]*result) {
	type row struct {
		name string
		unit string
		get  func(*result) float64
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s := func(d time.Duration) float64 { return d.Seconds() }
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	rows := []row{
		{"nodes Ready, from the simulator's start", "s", func(r *result) float64 { return s(r.nodesReady) }},
		{"first create to all pods Ready", "s", func(r *result) float64 { return s(r.allReady) }},
		{"pods Ready per second", "pods/s", func(r *result) float64 { return float64(len(r.readyLat)) / r.allReady.Seconds() }},
		{"create to Ready p50", "ms", func(r *result) float64 { return ms(testenv.Percentile(r.readyLat, 0.5)) }},
		{"create to Ready p99", "ms", func(r *result) float64 { return ms(testenv.Percentile(r.readyLat, 0.99)) }},
		{"simulator CPU, first create to all Ready", "s", func(r *result) float64 { return r.simCPU[spanCreate] }},
		{fmt.Sprintf("simulator CPU over the %v hold", k.hold), "s", func(r *result) float64 { return r.simCPU[spanHold] }},
		{"simulator RSS a fifth into the hold", "MiB", func(r *result) float64 { return mib(r.rssFifth) }},
		{"simulator RSS at the end of the hold", "MiB", func(r *result) float64 { return mib(r.rssEnd) }},
		{"simulator largest RSS sampled in the hold (every 1s)", "MiB", func(r *result) float64 { return mib(r.rssMax) }},
		{"simulator peak RSS since its start (VmHWM)", "MiB", func(r *result) float64 { return mib(r.rssHWM) }},
		{"first delete to all pods gone", "s", func(r *result) float64 { return s(r.allGone) }},
		{"delete to gone p50", "ms", func(r *result) float64 { return ms(testenv.Percentile(r.goneLat, 0.5)) }},
		{"delete to gone p99", "ms", func(r *result) float64 { return ms(testenv.Percentile(r.goneLat, 0.99)) }},
		{"simulator CPU, first delete to all gone", "s", func(r *result) float64 { return r.simCPU[spanDelete] }},
		{"API server CPU, first create to all Ready", "s", func(r *result) float64 { return r.apiCPU[spanCreate] }},
		{fmt.Sprintf("API server CPU over the %v hold", k.hold), "s", func(r *result) float64 { return r.apiCPU[spanHold] }},
		{"API server CPU, first delete to all gone", "s", func(r *result) float64 { return r.apiCPU[spanDelete] }},
		{"pod updates per pod, create to the first delete", "", func(r *result) float64 { return float64(r.updates[0]) / float64(len(r.readyLat)) }},
		{"pod updates per pod, first delete to all gone", "", func(r *result) float64 { return float64(r.updates[1]) / float64(len(r.goneLat)) }},
		{"node leases at the end of the hold", "", func(r *result) float64 { return float64(r.leases) }},
	}
	ratio := results["kwok"] != nil && results["fleet"] != nil
	fmt.Printf("\n%d nodes, %d pods (%d clients, hold %v):\n\n", w.nodes, w.pods, k.clients, k.hold)
	header, rule := "| |", "|---|"
	for _, sim := range k.sims {
		header += " " + sim + " |"
		rule += "---:|"
	}
	if ratio {
		header += " fleet/kwok |"
		rule += "---:|"
	}
	fmt.Println(header)
	fmt.Println(rule)
	for _, r := range rows {
		name := r.name
		if r.unit != "" {
			name += " (" + r.unit + ")"
		}
		line := "| " + name + " |"
		for _, sim := range k.sims {
			line += " " + format(r.get(results[sim])) + " |"
		}
		if ratio {
			kw, fl := r.get(results["kwok"]), r.get(results["fleet"])
			if kw != 0 {
				line += fmt.Sprintf(" %.2f |", fl/kw)
			} else {
				line += " - |"
			}
		}
		fmt.Println(line)
	}
	fmt.Println()
}

// format prints v with three significant digits or so.
func format(v float64) string {
	switch {
	case v == float64(int64(v)):
		return strconv.FormatInt(int64(v), 10)
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
