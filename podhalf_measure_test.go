package nodekit_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync"
)

// readySeen records, from one watch of the node's pods, when each pod was
// first seen Running and Ready and when it was seen deleted.
type readySeen struct {
	mu      sync.Mutex
	ready   map[string]time.Time
	deleted map[string]time.Time
}

func watchReady(t *testing.T, h *podHalf, ctx context.Context) *readySeen {
	t.Helper()
	r := &readySeen{ready: map[string]time.Time{}, deleted: map[string]time.Time{}}
	sel := fields.OneTermEqualSelector("spec.nodeName", h.node).String()
	list, err := h.admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	w, err := h.admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			now := time.Now()
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			r.mu.Lock()
			if _, seen := r.ready[p.Name]; !seen && podReady(p) {
				r.ready[p.Name] = now
			}
			if ev.Type == watch.Deleted {
				r.deleted[p.Name] = now
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *readySeen) readyAt(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.ready[name]
	return t, ok
}

func (r *readySeen) deletedAt(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.deleted[name]
	return t, ok
}

// TestMeasurePods prints figures of the whole pod half as NewPodHalf builds
// it (API source → podsync.Engine on the CRI backend on containerd →
// status.Writer, as system:node:<name>, default timing) and asserts nothing about them. It runs only when
// NODEKIT_MEASURE=1 (hack/measure-pods.sh sets it):
//
//   - start latency, from just before the admin's Create to the watch
//     seeing the pod Running and Ready, for MEASURE_PODS (30) pods one at a
//     time (each deleted with grace 30 before the next) and as many created
//     at once;
//   - the time from deleting those pods with grace 0 to a runtime without
//     sandboxes or containers;
//   - the node's API requests, request bytes and response bytes per pod
//     lifecycle (create, Running, Ready, graceful delete, final delete) over
//     the one-at-a-time pods, split into the status writer (the pods of a
//     namespace) and the pod source (the pods of all namespaces), and the
//     CRI calls per pod by operation with their mean;
//   - with MEASURE_RUNNING=N, all of it with N more pods running (created
//     at once and Ready first; every other one with an exec liveness
//     probe), as on a full node.
func TestMeasurePods(t *testing.T) {
	if os.Getenv("NODEKIT_MEASURE") != "1" {
		t.Skip("set NODEKIT_MEASURE=1 (hack/measure-pods.sh) to measure the pod half")
	}
	n := 30
	if s := os.Getenv("MEASURE_PODS"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			t.Fatalf("MEASURE_PODS=%q", s)
		}
	}
	running := 0
	if s := os.Getenv("MEASURE_RUNNING"); s != "" {
		if _, err := fmt.Sscan(s, &running); err != nil || running < 0 {
			t.Fatalf("MEASURE_RUNNING=%q", s)
		}
	}
	o := podHalfOptions{trace: true, maxPods: max(110, running+n+1), cgroupsPerQOS: true}
	if s := os.Getenv("MEASURE_MAX_PARALLEL"); s != "" {
		if _, err := fmt.Sscan(s, &o.maxParallel); err != nil {
			t.Fatalf("MEASURE_MAX_PARALLEL=%q", s)
		}
	}
	h := startPodHalf(t, "nodekit-measure", o)
	ctx := context.Background()
	seen := watchReady(t, h, ctx)
	pods := h.admin.CoreV1().Pods("default")
	const cmd = "trap 'exit 0' TERM; sleep 3600 & wait"

	// Warm up: the first pod pays for the API source's list and the first
	// sandbox; it is not counted.
	warm := h.pod("warm", cmd)
	h.create(warm)
	testenv.Eventually(t, 60*time.Second, 5*time.Millisecond, "warm-up pod ready", func() bool { _, ok := seen.readyAt("warm"); return ok })
	h.deleteAndWaitGone(warm, 30)

	// MEASURE_RUNNING pods keep running through the rest, every other one
	// with an exec liveness probe, as a full node's are.
	if running > 0 {
		for i := range running {
			p := h.pod(fmt.Sprintf("running-%d", i), cmd)
			if i%2 == 0 {
				p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
					PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
			}
			h.create(p)
		}
		for i := range running {
			name := fmt.Sprintf("running-%d", i)
			testenv.Eventually(t, 10*time.Minute, 20*time.Millisecond, name+" ready", func() bool { _, ok := seen.readyAt(name); return ok })
		}
		defer func() {
			zero := int64(0)
			for i := range running {
				_ = pods.Delete(ctx, fmt.Sprintf("running-%d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
			testenv.Eventually(t, 5*time.Minute, 50*time.Millisecond, "containerd empty", h.runtimeEmpty)
		}()
	}

	// One at a time.
	const criOps, criOp = "kubelet_runtime_operations_duration_seconds", "operation_type"
	beforeW, beforeS, beforeOps := h.writes.Count(), h.source.Count(), testenv.Histograms(t, h.criOps, criOps, criOp)
	var seq []time.Duration
	seqStarts := map[string]time.Time{}
	grace := int64(30)
	for i := range n {
		name := fmt.Sprintf("seq-%d", i)
		start := time.Now()
		seqStarts[name] = start
		h.create(h.pod(name, cmd))
		testenv.Eventually(t, 60*time.Second, 2*time.Millisecond, name+" ready", func() bool { _, ok := seen.readyAt(name); return ok })
		at, _ := seen.readyAt(name)
		seq = append(seq, at.Sub(start))
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 60*time.Second, 5*time.Millisecond, name+" gone", func() bool { _, ok := seen.deletedAt(name); return ok })
	}
	testenv.Eventually(t, 60*time.Second, 20*time.Millisecond, "containerd holding the running pods alone", func() bool { return h.runtimeHolds(running) })
	writes, source := h.writes.Count().Sub(beforeW), h.source.Count().Sub(beforeS)
	seqOps := testenv.Histograms(t, h.criOps, criOps, criOp)

	// At once.
	var par []time.Duration
	starts := make([]time.Time, n)
	first := time.Now()
	for i := range n {
		starts[i] = time.Now()
		h.create(h.pod(fmt.Sprintf("par-%d", i), cmd))
	}
	parStarts := map[string]time.Time{}
	for i, s := range starts {
		parStarts[fmt.Sprintf("par-%d", i)] = s
	}
	var allReady time.Time
	for i := range n {
		name := fmt.Sprintf("par-%d", i)
		testenv.Eventually(t, 120*time.Second, 5*time.Millisecond, name+" ready", func() bool { _, ok := seen.readyAt(name); return ok })
		at, _ := seen.readyAt(name)
		par = append(par, at.Sub(starts[i]))
		if at.After(allReady) {
			allReady = at
		}
	}

	// Deleted with grace 0 until the runtime is clean.
	zero := int64(0)
	delStart := time.Now()
	for i := range n {
		if err := pods.Delete(ctx, fmt.Sprintf("par-%d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	var clean time.Duration
	testenv.Eventually(t, 120*time.Second, 5*time.Millisecond, "no sandboxes", func() bool {
		sbs, err := h.rt.ListPodSandbox(ctx, nil)
		if err == nil && len(sbs) == running {
			clean = time.Since(delStart)
			return true
		}
		return false
	})
	testenv.Eventually(t, 60*time.Second, 20*time.Millisecond, "containerd holding the running pods alone", func() bool { return h.runtimeHolds(running) })

	per := func(v int64) string { return fmt.Sprintf("%.1f", float64(v)/float64(n)) }
	verbs := func(c testenv.APICount) string {
		var s []string
		for k, v := range c.Verbs() {
			s = append(s, fmt.Sprintf("%s %d", k, v.Requests))
		}
		sort.Strings(s)
		return strings.Join(s, ", ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| start latency, %d pods one at a time, p50 | %.3f s |\n", n, testenv.Percentile(seq, 0.5).Seconds())
	fmt.Fprintf(&b, "| start latency, %d pods one at a time, p99 | %.3f s |\n", n, testenv.Percentile(seq, 0.99).Seconds())
	fmt.Fprintf(&b, "| start latency, %d pods at once, p50 | %.3f s |\n", n, testenv.Percentile(par, 0.5).Seconds())
	fmt.Fprintf(&b, "| start latency, %d pods at once, p99 | %.3f s |\n", n, testenv.Percentile(par, 0.99).Seconds())
	fmt.Fprintf(&b, "| %d pods at once, first create to last Ready | %.3f s |\n", n, allReady.Sub(first).Seconds())
	fmt.Fprintf(&b, "| %d pods deleted with grace 0 to no sandbox | %.3f s |\n", n, clean.Seconds())
	fmt.Fprintf(&b, "| per lifecycle, status writer: requests | %s (%s over %d) |\n", per(writes.Requests), verbs(writes), n)
	fmt.Fprintf(&b, "| per lifecycle, status writer: request bytes | %s |\n", per(writes.RequestBytes))
	fmt.Fprintf(&b, "| per lifecycle, status writer: response bytes | %s |\n", per(writes.ResponseBytes))
	fmt.Fprintf(&b, "| per lifecycle, pod source: requests | %s (%s over %d) |\n", per(source.Requests), verbs(source), n)
	fmt.Fprintf(&b, "| per lifecycle, pod source: watch bytes received | %s |\n", per(source.ResponseBytes))
	fmt.Fprintf(&b, "| per lifecycle, node total: requests, request bytes | %s, %s |\n",
		per(writes.Requests+source.Requests), per(writes.RequestBytes+source.RequestBytes))
	fmt.Fprintf(&b, "| per lifecycle, CRI calls by operation: count (mean) | %s |\n", criPerPod(beforeOps, seqOps, n))
	fmt.Print(b.String())
	fmt.Print(h.trace.breakdown(seen, "seq-", seqStarts), h.trace.breakdown(seen, "par-", parStarts))
	t.Logf("one at a time: %v", seq)
	t.Logf("at once: %v", par)
}

// breakdown prints, for the pods whose names start with prefix, the p50 and
// p99 of each stage of their start.
func (tr *tracer) breakdown(seen *readySeen, prefix string, starts map[string]time.Time) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var toSync, syncing, toReady, toWatch []time.Duration
	for name, start := range starts {
		ready, _ := seen.readyAt(name)
		toSync = append(toSync, tr.syncStart[name].Sub(start))
		syncing = append(syncing, tr.syncEnd[name].Sub(tr.syncStart[name]))
		toReady = append(toReady, tr.readySet[name].Sub(tr.syncEnd[name]))
		toWatch = append(toWatch, ready.Sub(tr.readySet[name]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| stage (%s*) | p50 | p99 |\n|---|---|---|\n", prefix)
	for _, st := range []struct {
		what string
		d    []time.Duration
	}{
		{"create to first SyncPod (API, watch, merger, engine)", toSync},
		{"first SyncPod (sandbox, container create and start)", syncing},
		{"SyncPod end to the writer sending Ready (relist, sync, writer)", toReady},
		{"Ready sent to the watch seeing it (PATCH, watch)", toWatch},
	} {
		fmt.Fprintf(&b, "| %s | %.3f s | %.3f s |\n", st.what, testenv.Percentile(st.d, 0.5).Seconds(), testenv.Percentile(st.d, 0.99).Seconds())
	}
	for _, st := range []struct {
		what string
		d    []time.Duration
	}{{"SyncTerminatingPod (all pods of the run)", tr.stopping}, {"SyncTerminatedPod (all pods of the run)", tr.removing}} {
		if len(st.d) > 0 {
			fmt.Fprintf(&b, "| %s | %.3f s | %.3f s |\n", st.what, testenv.Percentile(st.d, 0.5).Seconds(), testenv.Percentile(st.d, 0.99).Seconds())
		}
	}
	if len(tr.relists) > 0 {
		fmt.Fprintf(&b, "| relist duration (all %d relists) | %.3f s | %.3f s |\n", len(tr.relists),
			testenv.Percentile(tr.relists, 0.5).Seconds(), testenv.Percentile(tr.relists, 0.99).Seconds())
	}
	return b.String()
}

// syncRelister is a backend's syncer that also relists, as the CRI
// syncer does.
type syncRelister interface {
	podsync.PodSyncer
	podsync.Relister
}

// tracer wraps the backend's syncer and records, per pod name, when its
// first SyncPod began and ended and when the status writer sent the
// status that made it Running and Ready (tracedPods); and the relists',
// SyncTerminatingPods' and SyncTerminatedPods' durations.
type tracer struct {
	syncer syncRelister

	mu        sync.Mutex
	syncStart map[string]time.Time
	syncEnd   map[string]time.Time
	readySet  map[string]time.Time
	relists   []time.Duration
	stopping  []time.Duration // SyncTerminatingPod
	removing  []time.Duration // SyncTerminatedPod
}

func newTracer() *tracer {
	return &tracer{syncStart: map[string]time.Time{}, syncEnd: map[string]time.Time{}, readySet: map[string]time.Time{}}
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

// tracedPods is the status writer's client of a namespace's pods: it
// records in the tracer when a status patch that left a pod Running and
// Ready was sent.
type tracedPods struct {
	nodekit.PodClient
	tr *tracer
}

func (p tracedPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions,
	subresources ...string) (*corev1.Pod, error) {
	sent := time.Now()
	pod, err := p.PodClient.Patch(ctx, name, pt, data, opts, subresources...)
	if err == nil && podReady(pod) {
		p.tr.mu.Lock()
		if _, ok := p.tr.readySet[name]; !ok {
			p.tr.readySet[name] = sent
		}
		p.tr.mu.Unlock()
	}
	return pod, err
}

// criPerPod gives, for each CRI operation called between two readings of
// the runtime client's histograms, its calls per pod and their mean.
func criPerPod(a, b map[string]testenv.Histogram, pods int) string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(b)) {
		n := float64(b[op].Count) - float64(a[op].Count)
		if n <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f (%.1f ms)", op, n/float64(pods), 1000*(b[op].Sum-a[op].Sum)/n))
	}
	return strings.Join(parts, ", ")
}
