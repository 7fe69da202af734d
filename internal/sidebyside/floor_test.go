package sidebyside

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
)

// The heartbeat both nodes are configured with, from which the floor of
// the idle API rows is computed.
const (
	leaseDuration         = 40 * time.Second
	statusReportFrequency = 5 * time.Minute
)

// floorNode is the node identity the API floors are measured as; no agent
// runs for it. Its name is as long as the nodes' (bench-kubelet-0,
// bench-nodekit-0), so its lease is as large as theirs.
const floorNode = "bench-apionly-0"

// renewals is how many lease renewals the bytes floor is the median of.
const renewals = 10

// floors are the bounds under the table's rows, measured once before the
// first node starts: the runtime's with CRI calls straight to containerd
// (no agent), the API server's as a node identity with no agent.
type floors struct {
	startPar             int             // pods started at once (the agent's parallelism)
	seq, par             []time.Duration // BENCH_PODS one at a time (each started and removed before the next); at once
	parStopped, parGone  time.Duration   // BENCH_PODS stopped and removed at once
	density              map[int]*densityFigures
	mirror               []time.Duration // create of a mirror pod as the node identity
	renewalsHour         float64
	reportsHour          float64
	reqHour              float64 // renewals + status reports per hour
	renewBytes, recvHour float64 // received per renewal (median), and per hour
}

// measureFloors measures the floors; what it creates is gone when it
// returns.
func (b *bench) measureFloors() *floors {
	f := &floors{density: map[int]*densityFigures{}}
	b.phase("floor", "API server, as a node identity with no agent")
	b.apiFloor(f)
	b.phase("floor", "CRI straight to containerd, no agent")
	b.runtimeFloor(f)
	report("floor: API requests per idle hour: %v/(%v/4) = %.0f lease renewals + %v/%v = %.0f status reports = %.0f",
		time.Hour, leaseDuration, f.renewalsHour, time.Hour, statusReportFrequency, f.reportsHour, f.reqHour)
	report("floor: API bytes received per idle hour: %.0f bytes per lease renewal (median of %d, on the wire: TLS and HTTP/2 framing included) × %.0f renewals = %.1f KiB",
		f.renewBytes, renewals, f.renewalsHour, f.recvHour/1024)
	report("floor: mirror pod created as system:node:%s → seen in the bench's watch: %v", floorNode, roundAll(f.mirror))
	report("floor: CRI calls straight to containerd: pods started %d at a time (podsync.DefaultMaxParallel, the agent's engine), stopped and removed all at once (the engine bounds no pod being stopped)", f.startPar)
	return f
}

// apiFloor measures, as system:node:<floorNode> through a byte-counting
// proxy and with protobuf (as both nodes talk): the time from creating a
// mirror pod like the static pod phase's to the bench's watch of the
// node's pods seeing it (as that phase times its mirror pods),
// BENCH_STATIC_RUNS times; and the
// bytes received for a lease renewal (an update of the node's Lease with a
// new renewTime, as both nodes renew it), the median of renewals. The
// requests floor is computed from the configured lease duration and
// status report frequency.
func (b *bench) apiFloor(f *floors) {
	t, ctx := b.t, b.ctx
	f.renewalsHour = float64(time.Hour) / float64(leaseDuration/4)
	f.reportsHour = float64(time.Hour) / float64(statusReportFrequency)
	f.reqHour = f.renewalsHour + f.reportsHour

	node, err := b.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: floorNode}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases := b.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	defer func() {
		// Gone before the nodes run, also when the phase fails.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := leases.Delete(cctx, floorNode, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the floor's lease: %v", err)
		}
		if err := b.admin.CoreV1().Nodes().Delete(cctx, floorNode, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the floor's node: %v", err)
		}
	}()
	cfg, err := b.cp.NodeConfig(floorNode)
	if err != nil {
		t.Fatal(err)
	}
	cfg, proxy, err := testenv.ProxyConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	nc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The lease, as a node creates it, then renewed from the last one
	// written; the create opens the connection the renewals reuse.
	ownerRef := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: floorNode, UID: node.UID}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: floorNode, Namespace: corev1.NamespaceNodeLease, OwnerReferences: []metav1.OwnerReference{ownerRef}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(floorNode), LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if lease, err = nc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var sizes []float64
	for range renewals {
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		r0 := proxy.BytesReceived()
		if lease, err = nc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, float64(proxy.BytesReceived()-r0))
	}
	slices.Sort(sizes)
	f.renewBytes = sizes[len(sizes)/2]
	f.recvHour = f.renewBytes * f.renewalsHour

	// Mirror pods. NodeRestriction checks the owner's UID against the
	// Node in its informer, which may not have it yet: the first create,
	// not timed, is retried until it is admitted.
	mirror := func(i int) *corev1.Pod {
		name := fmt.Sprintf("bench-static-%d", i)
		p := b.pod(name+"-"+floorNode, floorNode, "trap 'exit 0' TERM; sleep 3600 & wait", nil)
		hash := string(uuid.NewUUID())
		p.Annotations = map[string]string{
			"kubernetes.io/config.source": "file",
			"kubernetes.io/config.hash":   hash,
			"kubernetes.io/config.mirror": hash,
			"kubernetes.io/config.seen":   time.Now().Format(time.RFC3339Nano),
		}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: floorNode, UID: node.UID, Controller: ptr.To(true)}}
		return p
	}
	pods := nc.CoreV1().Pods("default")
	remove := func(name string) {
		if err := b.admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	}
	warm := mirror(-1)
	var lastErr error
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "a mirror pod admitted for "+floorNode, func() bool {
		b.alive()
		_, lastErr = pods.Create(ctx, warm, metav1.CreateOptions{})
		return lastErr == nil
	})
	remove(warm.Name)
	// Timed as the row is: until the bench's own watch of the node's pods
	// sees it, so the floor holds the watch's delivery too.
	pw := b.watchPods(floorNode)
	defer pw.stop()
	for i := range b.staticRuns {
		p := mirror(i)
		start := time.Now()
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s := b.wait(pw, p.Name, "seen in the watch", time.Minute, func(s seen) bool { return !s.added.IsZero() })
		f.mirror = append(f.mirror, s.added.Sub(start))
		remove(p.Name)
	}
}

// runtimeFloor makes the pod phases' runtime work straight over CRI with
// runtime/remote (the agent's client), no agent: the same containerd,
// image, host-network busybox pods and command, the configs as both nodes
// send them (AsNodesSend), without probes; pods
// started podsync.DefaultMaxParallel at a time (the agent's engine's
// bound), stopped and removed all at once (the engine does not bound
// stopping). Their sandboxes, cgroups and logs are removed before it
// returns.
func (b *bench) runtimeFloor(f *floors) {
	t, ctx := b.t, b.ctx
	// Its CRI calls are timed as the nodes' are, so that the density
	// start's line can be set beside theirs.
	reg := prometheus.NewRegistry()
	rt, err := remote.New(remote.Options{Endpoint: b.c.Endpoint, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var logDirs []string
	podRoot, err := os.MkdirTemp("", "nodekit-floor-pods-")
	if err != nil {
		t.Fatal(err)
	}
	logDirs = append(logDirs, podRoot)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := removeSandboxes(cctx, b.rt); err != nil {
			t.Errorf("removing the floor's sandboxes: %v", err)
		}
		if err := b.c.RemoveCgroupsBelow(cctx, "kubepods"); err != nil {
			t.Errorf("removing the floor's cgroups: %v", err)
		}
		for _, d := range logDirs {
			if err := os.RemoveAll(d); err != nil {
				t.Errorf("removing the floor's logs and pod files: %v", err)
			}
		}
	}()
	f.startPar = podsync.DefaultMaxParallel
	build := func(prefix string, n int) []RuntimePod {
		pods := make([]RuntimePod, n)
		for i := range pods {
			name := fmt.Sprintf("%s-%d", prefix, i)
			uid := string(uuid.NewUUID())
			sb := b.c.SandboxConfig(name, "default", uid)
			// Where both nodes put a BestEffort pod's cgroup.
			sb.Linux.CgroupParent = path.Join(b.c.CgroupRoot, "kubepods", "besteffort", "pod"+uid)
			logDirs = append(logDirs, sb.LogDirectory)
			pods[i] = RuntimePod{Sandbox: sb, Containers: []*runtimeapi.ContainerConfig{b.c.BusyboxContainer("app", "sh", "-c", podCommand)}}
			if err := AsNodesSend(&pods[i], filepath.Join(podRoot, uid), "/etc/hosts"); err != nil {
				t.Fatal(err)
			}
		}
		return pods
	}
	startPods := func(pods []RuntimePod, par int) ([]string, []time.Duration) {
		t.Helper()
		b.alive()
		ids, took, err := StartPods(ctx, rt, pods, par)
		if err != nil {
			t.Fatalf("floor: starting %d pods over CRI: %v", len(pods), err)
		}
		return ids, took
	}
	start := func(prefix string, n, par int) ([]string, []time.Duration) {
		t.Helper()
		return startPods(build(prefix, n), par)
	}
	remove := func(ids []string) (stopped, gone time.Duration) {
		t.Helper()
		stopped, gone, err := RemovePods(ctx, rt, ids, len(ids))
		if err != nil {
			t.Fatalf("floor: removing %d pods over CRI: %v", len(ids), err)
		}
		return stopped, gone
	}

	// The first sandbox pays for the pause image's snapshot.
	ids, _ := start("floor-warm", 1, 1)
	remove(ids)
	for i := range b.pods {
		ids, took := start(fmt.Sprintf("floor-seq-%d", i), 1, 1)
		f.seq = append(f.seq, took[0])
		remove(ids)
	}
	ids, f.par = start("floor-par", b.pods, f.startPar)
	f.parStopped, f.parGone = remove(ids)
	for _, size := range b.densities {
		// The nodes' workload: every other pod serves HTTP and is ready
		// when its server answers; its exec liveness probe runs as an
		// agent runs it, through the next pods' starts.
		d := &densityFigures{}
		pods := build(fmt.Sprintf("floor-d%d", size), size)
		ports := freePorts(t, (size+1)/2)
		pctx, stopProbes := context.WithCancel(ctx)
		lv := &livenessLoops{rt: rt, period: probePeriod}
		began := time.Now()
		started := make([]time.Duration, size) // to the last StartContainer's return
		for i := range pods {
			if i%2 != 0 {
				continue
			}
			pods[i].Containers[0].Command = []string{"sh", "-c", httpdCommand(ports[i/2])}
			pods[i].Started = func(ctx context.Context, cids []string) error {
				started[i] = time.Since(began)
				lv.start(pctx, cids[0])
				return waitAnswer(ctx, ports[i/2], 2*time.Minute)
			}
		}
		ops0, h0, rs0, at0 := testenv.Histograms(t, reg, "kubelet_runtime_operations_duration_seconds", "operation_type"), b.hostTicks(), b.runtimeTicks(), time.Now()
		ids, d.ready = startPods(pods, f.startPar)
		d.allReady = slices.Max(d.ready)
		over := time.Since(at0)
		report("floor: density %d: from the first CRI call to all ready: %s, the runtime: %s; its CRI calls: %s", size,
			hostLine(h0, b.hostTicks(), over), runtimeLine(rs0, b.runtimeTicks(), over), syncsDelta(ops0, testenv.Histograms(t, reg, "kubelet_runtime_operations_duration_seconds", "operation_type")))
		for i := range d.ready {
			if started[i] == 0 {
				started[i] = d.ready[i]
			}
		}
		for i := range densityMore {
			more, took := start(fmt.Sprintf("floor-d%d-more-%d", size, i), 1, 1)
			ids = append(ids, more...)
			d.more = append(d.more, took[0])
		}
		stopProbes()
		execs, failed := lv.wait()
		d.stopped, d.gone = remove(ids)
		f.density[size] = d
		report("floor: density %d: all started %v, all ready (the servers answering) %v after the first call; %d liveness execs, %d failed; %d removed: stopped after %v, gone after %v",
			size, slices.Max(started).Round(time.Millisecond), d.allReady.Round(time.Millisecond), execs, failed,
			len(ids), d.stopped.Round(time.Millisecond), d.gone.Round(time.Millisecond))
	}
}

// probePeriod is the API's default probe period, the probed pods'.
const probePeriod = 10 * time.Second

// livenessLoops run exec liveness probes ("true", the probed pods') straight
// over CRI, as an agent runs them: the first a random part of the period
// after the container started, then every period, with the API's default
// timeout (1s).
type livenessLoops struct {
	rt     runtime.Runtime
	period time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	execs  int
	failed int
}

// start runs container id's probe until ctx ends.
func (l *livenessLoops) start(ctx context.Context, id string) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTimer(rand.N(l.period))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			res, err := l.rt.ExecSync(ctx, id, []string{"true"}, time.Second)
			if ctx.Err() != nil {
				return
			}
			l.mu.Lock()
			l.execs++
			if err != nil || res.ExitCode != 0 {
				l.failed++
			}
			l.mu.Unlock()
			tick.Reset(l.period)
		}
	}()
}

// wait waits for the loops, whose context has ended, and returns how many
// probes ran and how many of them failed.
func (l *livenessLoops) wait() (execs, failed int) {
	l.wg.Wait()
	return l.execs, l.failed
}

// waitAnswer polls the server on the host's port every 100ms until a GET
// of / answers below 400 (what a readiness probe takes for success), or
// fails after timeout.
func waitAnswer(ctx context.Context, port int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server on port %d did not answer within %v", port, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
