package sidebyside

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// bench is what both nodes share.
type bench struct {
	t          *testing.T
	ctx        context.Context
	cp         *controlplane.ControlPlane
	admin      kubernetes.Interface
	c          *containerdtest.Containerd
	rt         runtimeapi.RuntimeServiceClient
	auditLog   string
	nodeIP     string
	kubeletBin string
	agentBin   string
	host       *hostState

	pods, readyRuns, staticRuns int
	dataPods                    int
	idle, window                time.Duration
	densities                   []int // BENCH_DENSITY
	densityWindow               time.Duration
	profileSeconds              int      // BENCH_PROFILE_SECONDS: each density size's CPU profile
	profileDir                  string   // where profiles are written: BENCH_LOG_DIR, else the test's temporary directory
	agentExtra                  []string // BENCH_AGENT_ARGS: more agent flags
	maxPods                     int      // both nodes'
	settleLoad                  float64  // BENCH_SETTLE_LOAD: a phase waits for the load average to fall to it
	floor                       *floors  // measured before the first node

	major  int  // containerd's major version (containerdtest.Options.Major); 0: 1
	bridge bool // give containerd a bridge CNI network (pods with their own IPs)
	subnet *net.IPNet
}

// result holds one node's figures.
type result struct {
	ready                       time.Duration // median
	readyAll                    []time.Duration
	rssIdle, rssPods            int64
	cpuIdle, cpuPods            float64 // % of one core
	cpuScraped                  float64 // % of one core, idle, scraped by metrics-server
	scrapedWindow               time.Duration
	reqHour, sentHour, recvHour float64
	reqPod, sentPod, recvPod    float64
	seq, par                    []time.Duration
	seqGone                     []time.Duration // one at a time: delete (grace 30) to gone
	stopped, cleanup            time.Duration   // grace 0: to no sandbox ready, to none listed
	mirror, staticRunning       []time.Duration // one per static pod round
	data                        podDataFigures
	idleDetail, lifecycleDetail string
	idleWindow, podsWindow      time.Duration
	lifecycleSpan               time.Duration
	idleChildCPU, podsChildCPU  float64
	density                     map[int]*densityFigures // by BENCH_DENSITY size
	notes                       []string
	loadBefore, loadAfter       string
}

// TestSideBySide runs the same workload on the kubelet and on
// examples/agent, one after the other, and prints a Markdown table of both.
// It asserts nothing about the figures and runs only when NODEKIT_BENCH=1
// (hack/bench-vs-kubelet.sh sets it); the package documentation says what
// is measured and how.
func TestSideBySide(t *testing.T) {
	if os.Getenv("NODEKIT_BENCH") != "1" {
		t.Skip("set NODEKIT_BENCH=1 (hack/bench-vs-kubelet.sh) to measure the kubelet and the agent side by side")
	}
	if os.Geteuid() != 0 {
		t.Fatal("NODEKIT_BENCH=1 needs root: the kubelet and the containerd harness run as root")
	}
	b := &bench{t: t}
	var err error
	if b.pods, err = testenv.EnvInt("BENCH_PODS", 30); err != nil {
		t.Fatal(err)
	}
	if b.readyRuns, err = testenv.EnvInt("BENCH_READY_RUNS", 3); err != nil {
		t.Fatal(err)
	}
	if b.staticRuns, err = testenv.EnvInt("BENCH_STATIC_RUNS", 5); err != nil {
		t.Fatal(err)
	}
	if b.dataPods, err = testenv.EnvInt("BENCH_DATA_PODS", 5); err != nil || b.dataPods < 1 {
		t.Fatalf("BENCH_DATA_PODS: %v", err)
	}
	if b.idle, err = testenv.EnvDuration("MEASURE_IDLE", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if b.window, err = testenv.EnvDuration("MEASURE_WINDOW", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	density := "110,250"
	if s := os.Getenv("BENCH_DENSITY"); s != "" {
		density = s
	}
	if b.densities, err = parseDensity(density); err != nil {
		t.Fatal(err)
	}
	if b.densityWindow, err = testenv.EnvDuration("MEASURE_DENSITY_WINDOW", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	b.profileSeconds = 30
	if s := os.Getenv("BENCH_PROFILE_SECONDS"); s != "" {
		if b.profileSeconds, err = strconv.Atoi(s); err != nil || b.profileSeconds < 0 || b.profileSeconds > 300 {
			t.Fatalf("BENCH_PROFILE_SECONDS=%q: want 0 (no profiles) to 300", s)
		}
	}
	if b.profileDir = os.Getenv("BENCH_LOG_DIR"); b.profileDir == "" && b.profileSeconds > 0 {
		b.profileDir = t.TempDir() // here: profileAsync writes from a goroutine of its own
	}
	b.agentExtra = strings.Fields(os.Getenv("BENCH_AGENT_ARGS"))
	b.settleLoad = 3
	if s := os.Getenv("BENCH_SETTLE_LOAD"); s != "" {
		if b.settleLoad, err = strconv.ParseFloat(s, 64); err != nil || b.settleLoad < 0 {
			t.Fatalf("BENCH_SETTLE_LOAD=%q: want a load average (0: no wait)", s)
		}
	}
	// The kubelet's default, or room for the largest density size and
	// the pods started on top of it.
	b.maxPods = 110
	for _, n := range b.densities {
		b.maxPods = max(b.maxPods, n+densityMore)
	}
	kinds := []string{kubelet, nodekit}
	if s := os.Getenv("BENCH_ONLY"); s != "" {
		kinds = strings.Split(s, ",")
		for _, k := range kinds {
			if k != kubelet && k != nodekit {
				t.Fatalf("BENCH_ONLY=%q: want kubelet, nodekit or both, comma-separated", s)
			}
		}
	}
	perNode := b.idle + 3*b.window + time.Duration(b.readyRuns)*time.Minute + 15*time.Minute + settleMax
	floorTime := 5 * time.Minute
	for _, n := range b.densities {
		perNode += b.densityWindow + 10*time.Minute + settleMax + time.Duration(n)*3*time.Second + time.Duration(b.profileSeconds)*time.Second
		floorTime += time.Duration(n) * time.Second
	}
	// An interrupt ends the run through the context, so the clean-ups run.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, time.Duration(len(kinds))*perNode+floorTime+5*time.Minute)
	defer cancel()
	b.ctx = ctx
	b.phase("bench", "set up")
	b.setUp()
	b.floor = b.measureFloors()

	results := map[string]*result{}
	for _, k := range kinds {
		results[k] = b.run(k)
	}
	fmt.Print(b.table(kinds, results))
}

// setUp starts the control plane (with the audit log) and containerd (of
// major version b.major, with a bridge network when b.bridge) and builds
// the agent unless b.agentBin is set. Everything is stopped in t's
// clean-ups.
func (b *bench) setUp() {
	t := b.t
	b.host = recordHost()
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	b.auditLog = filepath.Join(dir, "audit.log")
	t.Cleanup(func() {
		if d := os.Getenv("BENCH_LOG_DIR"); d != "" {
			if data, err := os.ReadFile(b.auditLog); err == nil {
				_ = os.WriteFile(filepath.Join(d, "audit.log"), data, 0o644)
			}
		}
	})
	assets, err := controlplane.BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	b.kubeletBin = filepath.Join(assets, "kubelet")
	if _, err := os.Stat(b.kubeletBin); err != nil {
		t.Fatalf("the kubelet is not in %s (hack/testbin.sh builds it): %v", assets, err)
	}
	if b.nodeIP, err = defaultRouteIP(); err != nil {
		t.Fatalf("no default-route address for the node IP: %v", err)
	}

	if b.agentBin == "" {
		b.agentBin = buildAgent(t, dir)
	}

	cp, err := controlplane.Start(b.ctx, controlplane.Options{AssetsDir: assets, Aggregator: true, ExtraAPIServerArgs: map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    b.auditLog,
		"audit-log-format":  "json",
		"audit-log-mode":    "blocking",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	b.cp, b.admin = cp, cp.AdminClient()

	c, err := containerdtest.Start(b.ctx, containerdtest.Options{Major: b.major})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd's log ends with:\n%s", c.LogTail(40))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping containerd: %v", err)
		}
	})
	b.c, b.rt = c, c.RuntimeClient()
	nctx, ncancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer ncancel()
	if err := c.EnableNetwork(nctx); err != nil {
		t.Fatal(err)
	}
	if b.bridge {
		br, err := c.EnableBridge(nctx)
		if err != nil {
			t.Fatal(err)
		}
		// Registered after the containerd's clean-up, so it runs first;
		// the nodes' clean-ups, registered later, have removed the pods.
		t.Cleanup(func() {
			if err := br.Remove(context.Background()); err != nil {
				t.Errorf("removing the bridge network: %v", err)
			}
		})
		b.subnet = br.Subnet
	}
	if err := c.MakeCgroupRoot(); err != nil {
		t.Fatal(err)
	}
}

// buildAgent builds examples/agent into dir and returns the binary's path.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", bin, "github.com/nodekit/nodekit/examples/agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	return bin
}

// settleMax is the longest a phase waits for the machine to settle.
const settleMax = 5 * time.Minute

// settle waits, up to settleMax, until the one-minute load average is at
// or below BENCH_SETTLE_LOAD, so that a node's phase does not begin in the
// load the phase before it left (the floor's pods, the other node's): the
// load average falls by about 1/e a minute once the work is done. It
// reports how long it waited and the load it began at.
func (b *bench) settle(kind, what string) {
	if b.settleLoad == 0 {
		return
	}
	start, from := time.Now(), testenv.LoadAvg()
	for {
		f := strings.Fields(testenv.LoadAvg())
		load, err := strconv.ParseFloat(f[0], 64)
		if err != nil || load <= b.settleLoad {
			break
		}
		if time.Since(start) >= settleMax {
			report("%s: %s: the load average did not fall to %g within %v: %s", kind, what, b.settleLoad, settleMax, testenv.LoadAvg())
			return
		}
		b.pause(5 * time.Second)
	}
	if waited := time.Since(start); waited > time.Second {
		report("%s: %s: waited %v for the load average to fall from %s to %g or less", kind, what, waited.Round(time.Second), from, b.settleLoad)
	}
}

// phase logs the start of a phase with the wall-clock time.
func (b *bench) phase(kind, what string) {
	b.t.Logf("%s %s: %s", time.Now().Format("15:04:05.000"), kind, what)
}

// report prints a line the script passes on.
func report(format string, args ...any) { fmt.Printf("BENCH "+format+"\n", args...) }

// run measures one kind of node.
func (b *bench) run(kind string) *result {
	t := b.t
	b.settle(kind, "start to Ready")
	r := &result{loadBefore: testenv.LoadAvg(), density: map[int]*densityFigures{}}
	b.phase(kind, "start to Ready")
	report("%s: load average before: %s", kind, r.loadBefore)

	// Start to Ready, on fresh nodes; the last one stays for the rest.
	var n *node
	for i := range b.readyRuns {
		name := fmt.Sprintf("bench-%s-%d", kind, i)
		var ready <-chan time.Time
		n, ready = b.startNode(kind, name)
		select {
		case at := <-ready:
			r.readyAll = append(r.readyAll, at.Sub(n.started))
		case <-n.done:
			n.alive()
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s %s not Ready within 2m; its log ends with:\n%s", kind, name, tail(n.log, 40))
		}
		if i < b.readyRuns-1 {
			n.clean()
		}
	}
	r.ready = testenv.Percentile(r.readyAll, 0.5)
	report("%s: start to Node Ready: %v", kind, r.readyAll)
	pw := b.watchPods(n.name)
	b.phase(kind, "started; idle")

	// Idle.
	reports, stopReports := b.watchStatusReports(n.name)
	b.pause(b.idle)
	n.alive()
	rss, err := testenv.ProcRSS(n.pid())
	if err != nil {
		t.Fatal(err)
	}
	r.rssIdle = rss
	stopReceipts := b.watchReceipts(n)
	f0, f1, periods := b.idleSamples(n, reports)
	stopReports()
	report("%s: idle bytes received, by arrival (50 ms apart): %s", kind, stopReceipts(f0.at, f1.at))
	r.idleWindow = f1.at.Sub(f0.at)
	if periods > 0 {
		report("%s: idle window %v: %d status report period(s) from midway between two reports", kind, r.idleWindow.Round(time.Millisecond), periods)
	}
	r.cpuIdle, r.idleChildCPU = cpuPercent(f0, f1)
	reqs, detail := b.requests(n.name, f0.at, f1.at)
	hour := float64(time.Hour) / float64(r.idleWindow)
	r.reqHour = float64(reqs) * hour
	r.sentHour = float64(f1.sent-f0.sent) * hour
	r.recvHour = float64(f1.recv-f0.recv) * hour
	r.idleDetail = formatDetail(detail, hour)
	report("%s: idle requests per hour by verb and resource: %s", kind, r.idleDetail)
	b.objectSizes(kind, n.name)

	// Idle again, scraped by metrics-server every 15s.
	b.phase(kind, "idle, scraped by metrics-server")
	r.cpuScraped, r.scrapedWindow = b.scraped(kind, n)

	// One at a time, with the requests and bytes per lifecycle.
	b.phase(kind, "pods one at a time")
	// Each pod is deleted once its log says "trapped" (podCommand), so
	// that a graceful delete does not wait out the grace period whichever
	// agent is faster to report Ready.
	prefix := kind[:1] + "-"
	s0 := b.sample(n)
	for i := range b.pods {
		name := fmt.Sprintf("%sseq-%d", prefix, i)
		start := time.Now()
		b.create(b.pod(name, n.name, podCommand, nil))
		s := b.wait(pw, name, "Running and Ready", time.Minute, func(s seen) bool { return !s.ready.IsZero() })
		r.seq = append(r.seq, s.ready.Sub(start))
		b.waitTrapped(n, name)
		del := time.Now()
		b.delete(name, 30)
		s = b.wait(pw, name, "gone", time.Minute, func(s seen) bool { return !s.deleted.IsZero() })
		r.seqGone = append(r.seqGone, s.deleted.Sub(del))
	}
	s1 := b.sample(n)
	r.lifecycleSpan = s1.at.Sub(s0.at)
	idleShare := float64(r.lifecycleSpan) / float64(time.Hour) // of an idle hour
	reqs, detail = b.requests(n.name, s0.at, s1.at)
	pods := float64(b.pods)
	r.reqPod = (float64(reqs) - r.reqHour*idleShare) / pods
	r.sentPod = (float64(s1.sent-s0.sent) - r.sentHour*idleShare) / pods
	r.recvPod = (float64(s1.recv-s0.recv) - r.recvHour*idleShare) / pods
	r.lifecycleDetail = formatDetail(detail, 1/pods)
	report("%s: requests per pod lifecycle by verb and resource (idle share not taken off): %s", kind, r.lifecycleDetail)

	// At once, then deleted with grace 0 until the runtime has none.
	b.phase(kind, "pods at once")
	starts := map[string]time.Time{}
	var names []string
	for i := range b.pods {
		name := fmt.Sprintf("%spar-%d", prefix, i)
		names = append(names, name)
		starts[name] = time.Now()
		b.create(b.pod(name, n.name, podCommand, nil))
	}
	uids := map[string]bool{}
	for _, name := range names {
		s := b.wait(pw, name, "Running and Ready", 2*time.Minute, func(s seen) bool { return !s.ready.IsZero() })
		r.par = append(r.par, s.ready.Sub(starts[name]))
		uids[s.uid] = true
	}
	del := time.Now()
	for _, name := range names {
		b.delete(name, 0)
	}
	stopped, gone := b.waitNoSandboxes(uids, 2*time.Minute, true)
	r.stopped, r.cleanup = stopped.Sub(del), gone.Sub(del)
	n.alive()

	// With pods that are probed.
	b.phase(kind, "probed pods")
	uids = map[string]bool{}
	names = nil
	for i := range b.pods {
		name := fmt.Sprintf("%sprobed-%d", prefix, i)
		names = append(names, name)
		b.create(b.probedPod(name, n.name, freePort(t)))
	}
	for _, name := range names {
		s := b.wait(pw, name, "Running and Ready", 2*time.Minute, func(s seen) bool { return !s.ready.IsZero() })
		uids[s.uid] = true
	}
	p0 := b.sample(n)
	b.pause(b.window)
	n.alive()
	p1 := b.sample(n)
	r.podsWindow = p1.at.Sub(p0.at)
	r.cpuPods, r.podsChildCPU = cpuPercent(p0, p1)
	if r.rssPods, err = testenv.ProcRSS(n.pid()); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if s := pw.get(name); !s.unready.IsZero() || !s.deleted.IsZero() {
			r.notes = append(r.notes, fmt.Sprintf("%s: probed pod %s was not Ready throughout the window", kind, name))
		}
	}
	for _, name := range names {
		b.delete(name, 0)
	}
	b.waitNoSandboxes(uids, 2*time.Minute, false)

	// Pods that read a ConfigMap, a Secret and a token from the API.
	b.phase(kind, "pods with data")
	r.data = b.podData(kind, n, pw, r)
	report("%s: pod data, requests per pod from create to Running (idle share not taken off): %s", kind, r.data.setUpDetail)
	report("%s: pod data, requests per hour while they run (all pods, idle included): %s", kind, r.data.idleNote)

	// A static pod, BENCH_STATIC_RUNS times (one sample is too few to
	// compare tens of milliseconds).
	b.phase(kind, "static pod")
	for i := 0; i < b.staticRuns; i++ {
		mirror, running := b.staticPod(n, pw, fmt.Sprintf("bench-static-%d", i))
		r.mirror, r.staticRunning = append(r.mirror, mirror), append(r.staticRunning, running)
	}

	// Many pods at once, with the same maxPods on both nodes.
	for _, size := range b.densities {
		b.settle(kind, fmt.Sprintf("density %d", size))
		b.phase(kind, fmt.Sprintf("density: %d pods", size))
		r.density[size] = b.density(kind, n, pw, size, r)
	}

	r.loadAfter = testenv.LoadAvg()
	report("%s: load average after: %s", kind, r.loadAfter)
	pw.stop()
	b.phase(kind, "stop and clean up")
	n.clean()
	b.phase(kind, "done")
	r.notes = append(r.notes, b.host.hostNotes()...)
	return r
}

// podCommand is the workload pods' command. The shell is PID 1 of its
// container, which ignores TERM until the trap is set: "trapped" in its log
// says it is.
const podCommand = "trap 'exit 0' TERM; echo trapped; sleep 3600 & wait"

// figures is a sample of a node's counters.
type figures struct {
	at            time.Time
	cpu, childCPU int64
	sent, recv    int64
}

// idleSamples takes the idle window's first and last samples. A window
// of a status report period (5m) or more, MEASURE_WINDOW's default, starts
// midway between two of the node's status reports and lasts its whole
// number of periods (returned; the window's length rounded down to
// periods), so that it holds one periodic report per period for both
// nodes whatever their phase, and each of its ends lies half a period
// from any report: a report's answer and the watch events it sets off
// (the node's own watch of its Node gets the whole object again) fall
// inside the window together or outside it together, whenever they
// arrive (a window from just after one report to just after another
// could count them or not by a few milliseconds' order: 4.5 KB of a
// window's 27 for the agent). The kubelet's period runs a few seconds
// over 5m, checked every 10s: over the window's periods its reports
// drift by less than the half period either side. A shorter window (the
// smoke knobs) is taken as it comes, and periods is 0.
func (b *bench) idleSamples(n *node, reports <-chan time.Time) (first, last figures, periods int) {
	if b.window < statusReportFrequency {
		first = b.sample(n)
		b.pause(b.window)
		n.alive()
		return first, b.sample(n), 0
	}
	periods = int(b.window / statusReportFrequency)
	var lastReport time.Time
	for drained := false; !drained; { // reports seen during the pause before
		select {
		case lastReport = <-reports:
		default:
			drained = true
		}
	}
	if lastReport.IsZero() || time.Since(lastReport) >= statusReportFrequency/2 {
		lastReport = b.nextReport(n, reports)
	}
	b.pause(time.Until(lastReport.Add(statusReportFrequency / 2)))
	n.alive()
	first = b.sample(n)
	b.pause(time.Until(first.at.Add(time.Duration(periods) * statusReportFrequency)))
	n.alive()
	return first, b.sample(n), periods
}

// reportWait is how long nextReport waits: the first of the kubelet's
// reports after its start that the script saw came 7.5 minutes after it
// (2026-12-07 22:02), not one period, which a short MEASURE_IDLE and a
// period and a minute to wait did not cover.
const reportWait = 2 * statusReportFrequency

// nextReport waits for the node's next status report and returns when it
// was seen, failing when none comes within reportWait.
func (b *bench) nextReport(n *node, reports <-chan time.Time) time.Time {
	tm := time.NewTimer(reportWait)
	defer tm.Stop()
	var at time.Time
	select {
	case at = <-reports:
	case <-tm.C:
		b.t.Fatalf("%s: no status report within %v", n.name, reportWait)
	case <-b.ctx.Done():
		b.t.Fatalf("stopping (interrupted, or out of time): %v", b.ctx.Err())
	}
	n.alive()
	return at
}

func (b *bench) sample(n *node) figures {
	b.t.Helper()
	cpu, err := testenv.ProcCPUTicks(n.pid())
	if err != nil {
		b.t.Fatal(err)
	}
	return figures{at: time.Now(), cpu: cpu, childCPU: childTicks(n.pid()),
		sent: n.proxy.BytesSent(), recv: n.proxy.BytesReceived()}
}

// cpuPercent returns the process's CPU and that of the children it waited
// for, in % of one core, between two samples.
func cpuPercent(a, b figures) (self, children float64) {
	secs := b.at.Sub(a.at).Seconds()
	return 100 * float64(b.cpu-a.cpu) / testenv.TicksPerSecond / secs,
		100 * float64(b.childCPU-a.childCPU) / testenv.TicksPerSecond / secs
}

// childTicks returns cutime+cstime of pid: the CPU of the children it ran
// and waited for (the kubelet runs mount, du and the like).
func childTicks(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var cu, cs int64
	fmt.Sscan(f[13], &cu)
	fmt.Sscan(f[14], &cs)
	return cu + cs
}

// waitTrapped waits until the log of pod name's container (containerd
// writes it where the agent said) shows that its shell handles TERM.
func (b *bench) waitTrapped(n *node, name string) {
	b.t.Helper()
	testenv.Eventually(b.t, 30*time.Second, 5*time.Millisecond, name+" handles TERM", func() bool {
		b.alive()
		logs, _ := filepath.Glob(filepath.Join(n.logDir, "default_"+name+"_*", "app", "*.log"))
		for _, l := range logs {
			if data, err := os.ReadFile(l); err == nil && strings.Contains(string(data), "trapped") {
				return true
			}
		}
		return false
	})
}

// alive fails the test when its context has ended (interrupted, or out of
// time).
func (b *bench) alive() {
	if err := b.ctx.Err(); err != nil {
		b.t.Fatalf("stopping (interrupted, or out of time): %v", b.ctx.Err())
	}
}

// pause waits d, or fails when the test's context ends first.
func (b *bench) pause(d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-b.ctx.Done():
		b.t.Fatalf("stopping (interrupted, or out of time): %v", b.ctx.Err())
	}
}

// pod is the workload pod: busybox on the host network, no service account
// token, no service links, ending at once on TERM.
func (b *bench) pod(name, nodeName, command string, mod func(*corev1.Container)) *corev1.Pod {
	no := false
	grace := int64(30)
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: nodeName, HostNetwork: true, DNSPolicy: corev1.DNSDefault,
			AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: b.c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", command}}},
		},
	}
	if mod != nil {
		mod(&p.Spec.Containers[0])
	}
	return p
}

// probedPod serves HTTP on port (host network) with a readiness probe on
// it and an exec liveness probe, both at the API's default timing.
func (b *bench) probedPod(name, nodeName string, port int) *corev1.Pod {
	return b.pod(name, nodeName, httpdCommand(port), func(c *corev1.Container) {
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(int32(port))}}}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	})
}

// httpdCommand serves HTTP on port with busybox's httpd until TERM.
func httpdCommand(port int) string {
	return fmt.Sprintf("mkdir -p /tmp/www && echo ok >/tmp/www/index.html && trap 'exit 0' TERM; httpd -f -p %d -h /tmp/www & wait", port)
}

func (b *bench) create(p *corev1.Pod) {
	b.t.Helper()
	if _, err := b.admin.CoreV1().Pods(p.Namespace).Create(b.ctx, p, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bench) delete(name string, grace int64) {
	b.t.Helper()
	if err := b.admin.CoreV1().Pods("default").Delete(b.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		b.t.Fatal(err)
	}
}

// waitNoSandboxes polls CRI ListPodSandbox until no sandbox of the pods
// with the given UIDs is ready or, with untilGone, listed at all, and
// returns when it first saw none of them ready (all stopped) and when it saw
// none listed. (The kubelet removes stopped sandboxes in its garbage
// collection, once a minute; a node's clean-up removes what is left.) It
// fails the test when that does not happen within timeout.
func (b *bench) waitNoSandboxes(uids map[string]bool, timeout time.Duration, untilGone bool) (stopped, gone time.Time) {
	b.t.Helper()
	stopped, gone, left := b.sandboxesLeft(uids, timeout, untilGone)
	switch {
	case left < 0:
		b.t.Fatalf("no sandbox of the deleted pods: not within %v: the runtime did not list its sandboxes", timeout)
	case left > 0:
		b.t.Fatalf("no sandbox of the deleted pods: not within %v: %d left", timeout, left)
	}
	return stopped, gone
}

// sandboxesLeft is waitNoSandboxes that does not fail: it returns, with
// the times, how many sandboxes of the pods were listed (untilGone) or
// ready when timeout ran out, 0 when none was, -1 when no listing
// succeeded.
func (b *bench) sandboxesLeft(uids map[string]bool, timeout time.Duration, untilGone bool) (stopped, gone time.Time, left int) {
	b.t.Helper()
	left = -1 // until a listing succeeds
	_ = testenv.Poll(timeout, 5*time.Millisecond, "no sandbox of the deleted pods", func() (bool, error) {
		b.alive()
		resp, err := b.rt.ListPodSandbox(b.ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return false, err
		}
		listed, ready := 0, 0
		for _, sb := range resp.GetItems() {
			if uids[sb.GetMetadata().GetUid()] {
				listed++
				if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
					ready++
				}
			}
		}
		now := time.Now()
		if ready == 0 && stopped.IsZero() {
			stopped = now
		}
		if listed == 0 {
			gone = now
		}
		left = ready
		if untilGone {
			left = listed
		}
		return left == 0, nil
	})
	return stopped, gone, left
}

// staticPod writes a static pod manifest into the node's manifest
// directory (by a rename, so it appears whole) and returns the times to the
// mirror pod in the API and to its status Running; then it removes the file
// and waits until the mirror pod and the sandbox are gone.
func (b *bench) staticPod(n *node, pw *podWatch, podName string) (mirror, running time.Duration) {
	t := b.t
	p := b.pod(podName, "", "trap 'exit 0' TERM; sleep 3600 & wait", nil)
	p.Spec.NodeName = ""
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(n.static, "."+podName+".json")
	final := filepath.Join(n.static, podName+".json")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	name := podName + "-" + n.name
	start := time.Now()
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	s := b.wait(pw, name, "a mirror pod", time.Minute, func(s seen) bool { return !s.added.IsZero() })
	mirror = s.added.Sub(start)
	s = b.wait(pw, name, "Running", time.Minute, func(s seen) bool { return !s.running.IsZero() })
	running = s.running.Sub(start)
	if err := os.Remove(final); err != nil {
		t.Fatal(err)
	}
	b.wait(pw, name, "gone", time.Minute, func(s seen) bool { return !s.deleted.IsZero() })
	// The mirror pod's UID is not the static pod's: wait by name.
	testenv.Eventually(t, time.Minute, 20*time.Millisecond, "static pod's sandbox stopped", func() bool {
		b.alive()
		resp, err := b.rt.ListPodSandbox(b.ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
		if err != nil {
			return false
		}
		for _, sb := range resp.GetItems() {
			if sb.GetMetadata().GetName() == name {
				return false
			}
		}
		return true
	})
	return mirror, running
}
