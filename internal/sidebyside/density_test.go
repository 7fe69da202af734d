package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/testenv"
)

// densityMore is how many pods the density phase starts one at a time
// while its N pods run.
const densityMore = 10

// densityCreators is how many creates of the density phase's pods are in
// flight at once: the N pods are created together, not one after another.
const densityCreators = 8

// densityFigures are one density size's figures on a node, or (where the
// comments say) the floor's.
type densityFigures struct {
	// From the first create (floor: the first CRI call) to the last pod
	// Running and Ready (floor: its container started).
	allReady time.Duration
	ready    []time.Duration // each pod: create → Running and Ready (floor: CRI calls → started)
	cpu      float64         // % of one core over the window, with the N pods running
	rss      int64           // VmRSS after the window
	window   time.Duration
	more     []time.Duration // densityMore pods one at a time, with the N running
	// All N+densityMore deleted with grace 0 (floor: StopPodSandbox and
	// RemovePodSandbox, all at once): to no sandbox ready, to none listed.
	stopped, gone time.Duration
}

// parseDensity reads BENCH_DENSITY: pod counts, comma-separated, each run
// on every node; "0" is none.
func parseDensity(s string) ([]int, error) {
	if s == "0" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("BENCH_DENSITY=%q: want positive pod counts, comma-separated, or 0 for none", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// density runs size pods on n at once (every other one probed as the
// probed-pods phase's are: HTTP readiness, exec liveness), waits for all
// Running and Ready, measures the node's CPU over MEASURE_DENSITY_WINDOW and
// its VmRSS, starts densityMore plain pods one at a time, and deletes them
// all with grace 0, waiting until CRI lists none of their sandboxes.
func (b *bench) density(kind string, n *node, pw *podWatch, size int, r *result) *densityFigures {
	t := b.t
	d := &densityFigures{}
	prefix := fmt.Sprintf("%sd%d-", kind[:1], size)
	ports := freePorts(t, (size+1)/2)
	pods := make([]*corev1.Pod, size)
	for i := range pods {
		name := prefix + strconv.Itoa(i)
		if i%2 == 0 {
			pods[i] = b.probedPod(name, n.name, ports[i/2])
		} else {
			pods[i] = b.pod(name, n.name, podCommand, nil)
		}
	}
	// The start's own figures: the node's CPU, its pod workers' syncs and
	// CRI calls (kubelet_pod_worker_duration_seconds and
	// kubelet_runtime_operations_duration_seconds on both nodes) and, with
	// profiles on, a CPU profile of its first BENCH_PROFILE_SECONDS.
	s0, w0, h0, rs0 := b.sample(n), b.readOps(n.name), b.hostTicks(), b.runtimeTicks()
	startProfile := b.profileAsync(fmt.Sprintf("%s-density%d-start", kind, size), n)
	starts := b.createAll(pods, densityCreators)
	first := starts[pods[0].Name]
	for _, at := range starts {
		if at.Before(first) {
			first = at
		}
	}
	timeout := 2*time.Minute + time.Duration(size)*time.Second
	uids := map[string]bool{}
	var last time.Time
	for _, p := range pods {
		s := b.wait(pw, p.Name, "Running and Ready", timeout, func(s seen) bool { return !s.ready.IsZero() })
		d.ready = append(d.ready, s.ready.Sub(starts[p.Name]))
		if s.ready.After(last) {
			last = s.ready
		}
		uids[s.uid] = true
	}
	d.allReady = last.Sub(first)
	report("%s: density %d: all Running and Ready %v after the first create", kind, size, d.allReady.Round(time.Millisecond))
	s1, w1, h1, rs1 := b.sample(n), b.readOps(n.name), b.hostTicks(), b.runtimeTicks()
	cpuStart, _ := cpuPercent(s0, s1)
	report("%s: density %d: the node's CPU from before the first create to all Ready: %.1f%% of a core over %v, %s, the runtime: %s; pod worker syncs in that time: %s; its CRI calls: %s",
		kind, size, cpuStart, s1.at.Sub(s0.at).Round(time.Second), hostLine(h0, h1, s1.at.Sub(s0.at)), runtimeLine(rs0, rs1, s1.at.Sub(s0.at)), syncsDelta(w0.syncs, w1.syncs), syncsDelta(w0.cri, w1.cri))
	startProfile()
	b.densityBreakdown(kind, size, pods, pw, first)

	f0, rt0 := b.sample(n), b.runtimeTicks()
	b.pause(b.densityWindow)
	n.alive()
	f1, rt1 := b.sample(n), b.runtimeTicks()
	d.window = f1.at.Sub(f0.at)
	var children float64
	d.cpu, children = cpuPercent(f0, f1)
	var err error
	if d.rss, err = testenv.ProcRSS(n.pid()); err != nil {
		t.Fatal(err)
	}
	report("%s: density %d: CPU of waited-for children %.3f%% over %v", kind, size, children, d.window.Round(time.Second))
	report("%s: density %d: the runtime's CPU over the window: %s; %.1f processes started a second on the machine",
		kind, size, runtimeLine(rt0, rt1, d.window), float64(rt1.forks-rt0.forks)/d.window.Seconds())
	b.profiles(fmt.Sprintf("%s-density%d", kind, size), n)
	notReady := 0
	for _, p := range pods {
		if s := pw.get(p.Name); !s.unready.IsZero() || !s.deleted.IsZero() {
			notReady++
		}
	}
	if notReady > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%s: density %d: %d pods were not Ready throughout the window", kind, size, notReady))
	}

	names := make([]string, 0, size+densityMore)
	for _, p := range pods {
		names = append(names, p.Name)
	}
	for i := range densityMore {
		name := fmt.Sprintf("%smore-%d", prefix, i)
		start := time.Now()
		b.create(b.pod(name, n.name, podCommand, nil))
		// The phase's timeout, not less: a slow start on a loaded node is
		// a figure for the table, not a failed run.
		s := b.wait(pw, name, "Running and Ready", timeout, func(s seen) bool { return !s.ready.IsZero() })
		d.more = append(d.more, s.ready.Sub(start))
		uids[s.uid] = true
		names = append(names, name)
	}

	b.densityEvents(kind, size, prefix)

	del := time.Now()
	for _, name := range names {
		b.delete(name, 0)
	}
	// Removal gets more time than a start: the kubelet removes the
	// sandboxes of deleted pods in its once-a-minute garbage collection,
	// one after another, which on a loaded runtime took longer than the
	// start timeout at 250 pods.
	//
	// Sandboxes the node does not remove in that time are a figure, not a
	// failed run: the row says n/a, a note says how many were left, and
	// the node's clean-up removes them (killing their containers when the
	// runtime keeps them running) so that the next node can run.
	wait := 2*time.Minute + time.Duration(size+densityMore)*3*time.Second
	stopped, gone, left := b.sandboxesLeft(uids, wait, true)
	d.stopped, d.gone = stopped.Sub(del), gone.Sub(del)
	if stopped.IsZero() {
		d.stopped = -1
	}
	if left != 0 {
		d.gone = -1
		note := fmt.Sprintf("%s: density %d: %d sandboxes of the %d deleted pods still listed after %v (grace 0), left for the node's clean-up",
			kind, size, left, len(names), wait)
		if left < 0 {
			note = fmt.Sprintf("%s: density %d: the runtime did not list its sandboxes within %v after the %d pods were deleted", kind, size, wait, len(names))
		}
		r.notes = append(r.notes, note)
		report("%s", note)
	}
	report("%s: density %d: deleted with grace 0: no sandbox ready after %v, none listed after %v", kind, size,
		d.stopped.Round(time.Millisecond), d.gone.Round(time.Millisecond))
	n.alive()
	return d
}

// createAll creates pods, par creates in flight at once, and returns when
// each create call began.
func (b *bench) createAll(pods []*corev1.Pod, par int) map[string]time.Time {
	b.t.Helper()
	var mu sync.Mutex
	starts := make(map[string]time.Time, len(pods))
	var errs []error
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			_, err := b.admin.CoreV1().Pods(p.Namespace).Create(b.ctx, p, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			starts[p.Name] = start
			if err != nil {
				errs = append(errs, fmt.Errorf("creating pod %s: %w", p.Name, err))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.t.Fatal(err)
	}
	return starts
}

// freePorts returns n distinct TCP ports that were free a moment ago on
// every address (each is held until all are chosen, so none repeats).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// profiles takes the node's heap profile and a CPU profile of
// BENCH_PROFILE_SECONDS (after the CPU window, so it does not count in it)
// through the API server's node proxy, /debug/pprof/ on the node API (the
// kubelet's enableProfilingHandler, on by default for both), writes them
// to BENCH_LOG_DIR as <name>-heap.pb.gz and <name>-cpu.pb.gz, and reports
// each one's top functions (go tool pprof -top). Nothing is taken when
// BENCH_PROFILE_SECONDS is 0; a failure is reported, not fatal.
func (b *bench) profiles(name string, n *node) {
	if b.profileSeconds == 0 {
		return
	}
	b.profile(name, n, "heap", "heap", "-sample_index=inuse_space")
	b.profile(name, n, "cpu", "profile?seconds="+strconv.Itoa(b.profileSeconds), "")
}

// profile takes one profile of the node (path below /debug/pprof/), writes
// it to b.profileDir as <name>-<kind>.pb.gz and reports its top functions
// (go tool pprof -top, with the top flag when not ""); a failure is
// reported, not fatal.
func (b *bench) profile(name string, n *node, kind, path, top string) {
	ctx, cancel := context.WithTimeout(b.ctx, time.Duration(b.profileSeconds)*time.Second+time.Minute)
	raw, err := b.admin.CoreV1().RESTClient().Get().RequestURI("/api/v1/nodes/" + n.name + "/proxy/debug/pprof/" + path).DoRaw(ctx)
	cancel()
	if err != nil {
		report("%s: %s profile: %v", name, kind, err)
		return
	}
	file := filepath.Join(b.profileDir, name+"-"+kind+".pb.gz")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		report("%s: %s profile: %v", name, kind, err)
		return
	}
	args := []string{"tool", "pprof", "-top", "-nodecount=12"}
	if top != "" {
		args = append(args, top)
	}
	out, err := exec.CommandContext(b.ctx, "go", append(args, file)...).CombinedOutput()
	if err != nil {
		report("%s: %s profile in %s: go tool pprof: %v: %s", name, kind, file, err, out)
		return
	}
	report("%s: %s profile in %s:", name, kind, file)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		report("%s: %s:   %s", name, kind, line)
	}
}

// profileAsync starts taking a CPU profile of the node for
// BENCH_PROFILE_SECONDS (none when it is 0) and returns a function that
// waits for it and writes and reports it as profiles does.
func (b *bench) profileAsync(name string, n *node) (wait func()) {
	if b.profileSeconds == 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.profile(name, n, "cpu", "profile?seconds="+strconv.Itoa(b.profileSeconds), "")
	}()
	return func() { <-done }
}

// opsReading is a node's histograms by operation_type, read from its
// /metrics: the pod worker syncs (kubelet_pod_worker_duration_seconds)
// and the CRI calls (kubelet_runtime_operations_duration_seconds), each
// operation's sum and count. Nil maps when /metrics could not be read.
type opsReading struct{ syncs, cri map[string]testenv.Histogram }

// readOps reads the node's opsReading through the API server, waiting up
// to 3 minutes: at 250 pods on two cores (load average 150) the kubelet's
// /metrics took more than one.
func (b *bench) readOps(node string) opsReading {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Minute)
	defer cancel()
	raw, err := b.admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
	if err != nil {
		report("reading %s's /metrics through the API server: %v", node, err)
		return opsReading{}
	}
	return opsReading{
		syncs: parseByOperation(string(raw), "kubelet_pod_worker_duration_seconds"),
		cri:   parseByOperation(string(raw), "kubelet_runtime_operations_duration_seconds"),
	}
}

// parseByOperation reads a histogram's _sum and _count by operation_type
// from a Prometheus text exposition.
func parseByOperation(text, metric string) map[string]testenv.Histogram {
	out := map[string]testenv.Histogram{}
	for _, line := range strings.Split(text, "\n") {
		sum, count := strings.HasPrefix(line, metric+"_sum{"), strings.HasPrefix(line, metric+"_count{")
		if !sum && !count {
			continue
		}
		_, rest, ok := strings.Cut(line, `operation_type="`)
		op, _, ok2 := strings.Cut(rest, `"`)
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if !ok || !ok2 || err != nil {
			continue
		}
		h := out[op]
		if sum {
			h.Sum += v
		} else {
			h.Count += uint64(v)
		}
		out[op] = h
	}
	return out
}

// syncsDelta says how many of each operation ran between two readings of
// a histogram by operation and their mean duration.
func syncsDelta(a, b map[string]testenv.Histogram) string {
	if a == nil || b == nil {
		return "not read"
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(b)) {
		n := float64(b[op].Count) - float64(a[op].Count)
		if n <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f (mean %.3f s)", op, n, (b[op].Sum-a[op].Sum)/n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// densityBreakdown reports where a density start's time went, from the
// first create: the creates themselves, the phase Running in the watch,
// Ready, and the containers' start times the node reported (the runtime's
// clock, to the second), each as p50 and max, the probed and the plain
// pods apart.
func (b *bench) densityBreakdown(kind string, size int, pods []*corev1.Pod, pw *podWatch, first time.Time) {
	list, err := b.admin.CoreV1().Pods("default").List(b.ctx, metav1.ListOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	started := map[string]time.Time{}
	for _, p := range list.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil {
				started[p.Name] = c.State.Running.StartedAt.Time
			}
		}
	}
	var added, running, ready, start [2][]time.Duration // [0] probed, [1] plain
	for i, p := range pods {
		s := pw.get(p.Name)
		k := i % 2
		added[k] = append(added[k], s.added.Sub(first))
		running[k] = append(running[k], s.running.Sub(first))
		ready[k] = append(ready[k], s.ready.Sub(first))
		if at, ok := started[p.Name]; ok {
			start[k] = append(start[k], at.Sub(first.Truncate(time.Second)))
		}
	}
	line := func(d []time.Duration) string {
		if len(d) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f/%.1f s", testenv.Percentile(d, 0.5).Seconds(), testenv.Percentile(d, 1).Seconds())
	}
	for k, what := range []string{"probed", "plain"} {
		report("%s: density %d: %s pods from the first create, p50/max: in the watch %s, container started (node's clock) %s, Running %s, Ready %s",
			kind, size, what, line(added[k]), line(start[k]), line(running[k]), line(ready[k]))
	}
}

// densityEvents reports the events the node recorded for the phase's pods
// by type and reason (a warning's message by its first and last part),
// each counted with its repeats (count, or a series' count): what the node
// did to them besides starting them once.
func (b *bench) densityEvents(kind string, size int, prefix string) {
	list, err := b.admin.CoreV1().Events("default").List(b.ctx, metav1.ListOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	counts := map[string]int32{}
	for _, e := range list.Items {
		if !strings.HasPrefix(e.InvolvedObject.Name, prefix) {
			continue
		}
		n := max(e.Count, 1)
		if e.Series != nil {
			n = max(n, e.Series.Count)
		}
		key := e.Type + " " + e.Reason
		if e.Type == corev1.EventTypeWarning {
			// What failed and why: "Readiness probe failed: … connection
			// refused" as "(Readiness probe failed … connection refused)".
			first, _, _ := strings.Cut(e.Message, ":")
			key += " (" + first + " …" + e.Message[strings.LastIndex(e.Message, ":")+1:] + ")"
		}
		counts[key] += n
	}
	keys := slices.Sorted(maps.Keys(counts))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	report("%s: density %d: events for the pods, with repeats: %s", kind, size, strings.Join(parts, ", "))
}

// runtimeCPU is the CPU the runtime used up to a moment, in clock ticks:
// containerd's own, its shims' own and that of the children the shims
// waited for (runc for each start, stop and exec probe); and the processes
// the machine has started since it booted. A shim that exits takes its
// ticks with it, so the figures mean something only over a span in which
// the pods stay.
type runtimeCPU struct{ containerd, shims, shimChildren, forks int64 }

func (b *bench) runtimeTicks() runtimeCPU {
	var r runtimeCPU
	if t, err := testenv.ProcCPUTicksWithChildren(b.c.Pid()); err == nil {
		r.containerd = t
	}
	for _, pid := range b.c.Processes() {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || !strings.HasPrefix(string(comm), "containerd-shim") {
			continue
		}
		own, err1 := testenv.ProcCPUTicks(pid)
		all, err2 := testenv.ProcCPUTicksWithChildren(pid)
		if err1 == nil && err2 == nil {
			r.shims += own
			r.shimChildren += all - own
		}
	}
	if stat, err := os.ReadFile("/proc/stat"); err == nil {
		for _, line := range strings.Split(string(stat), "\n") {
			if v, ok := strings.CutPrefix(line, "processes "); ok {
				r.forks, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return r
}

// runtimeLine says what the runtime used between two readings, in % of a
// core.
func runtimeLine(a, b runtimeCPU, over time.Duration) string {
	return fmt.Sprintf("containerd %.1f%%, its shims %.1f%% and the runc they ran (starts, execs) %.1f%% of a core",
		ticksPercent(b.containerd-a.containerd, over), ticksPercent(b.shims-a.shims, over), ticksPercent(b.shimChildren-a.shimChildren, over))
}

// hostCPU is what the machine around a node used up to a moment, in clock
// ticks: the API server and etcd of the control plane, this process (the
// bench's clients, watches and probes of the servers), and all CPUs' busy
// and total time (/proc/stat: busy is all but idle and iowait).
type hostCPU struct{ apiserver, etcd, bench, busy, total int64 }

func (b *bench) hostTicks() hostCPU {
	var h hostCPU
	if t, err := testenv.ProcCPUTicksWithChildren(b.cp.APIServerPID()); err == nil {
		h.apiserver = t
	}
	if t, err := testenv.ProcCPUTicksWithChildren(b.cp.EtcdPID()); err == nil {
		h.etcd = t
	}
	if t, err := testenv.ProcCPUTicks(os.Getpid()); err == nil {
		h.bench = t
	}
	if stat, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(stat), "\n")
		if f := strings.Fields(line); len(f) > 5 && f[0] == "cpu" {
			for i, v := range f[1:] {
				n, _ := strconv.ParseInt(v, 10, 64)
				h.total += n
				if i != 3 && i != 4 { // idle, iowait
					h.busy += n
				}
			}
		}
	}
	return h
}

// hostLine says what the control plane, the bench and the machine used
// between two readings: the API server's, etcd's and the bench's CPU in %
// of a core, and the machine's busy share of all its CPUs.
func hostLine(a, b hostCPU, over time.Duration) string {
	busy := 0.0
	if b.total > a.total {
		busy = 100 * float64(b.busy-a.busy) / float64(b.total-a.total)
	}
	return fmt.Sprintf("the API server %.1f%%, etcd %.1f%% and the bench %.1f%% of a core, the machine's CPUs %.0f%% busy",
		ticksPercent(b.apiserver-a.apiserver, over), ticksPercent(b.etcd-a.etcd, over), ticksPercent(b.bench-a.bench, over), busy)
}

func ticksPercent(ticks int64, over time.Duration) float64 {
	return 100 * float64(ticks) / testenv.TicksPerSecond / over.Seconds()
}
