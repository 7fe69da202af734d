package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

// scripted is a Prober whose outcome per probe is set by the test. Probes
// are exec probes whose command is [container, type].
type scripted struct {
	mu       sync.Mutex
	outcomes map[string]Outcome
	calls    map[string]int
	panics   map[string]bool
}

func newScripted() *scripted {
	return &scripted{outcomes: map[string]Outcome{}, calls: map[string]int{}, panics: map[string]bool{}}
}

func pkey(name string, t Type) string { return name + "/" + t.String() }

func (s *scripted) set(name string, t Type, r Result) {
	s.mu.Lock()
	s.outcomes[pkey(name, t)] = Outcome{Result: r, Message: "scripted " + r.String()}
	s.mu.Unlock()
}

func (s *scripted) setOutcome(name string, t Type, o Outcome) {
	s.mu.Lock()
	s.outcomes[pkey(name, t)] = o
	s.mu.Unlock()
}

func (s *scripted) count(name string, t Type) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[pkey(name, t)]
}

func (s *scripted) Probe(_ context.Context, spec *corev1.Probe, _ Target) Outcome {
	k := strings.Join(spec.Exec.Command, "/")
	s.mu.Lock()
	s.calls[k]++
	o, ok := s.outcomes[k]
	p := s.panics[k]
	s.mu.Unlock()
	if p {
		panic("handler bug in " + k)
	}
	if !ok {
		return Outcome{Result: Success}
	}
	return o
}

func spec(name string, t Type, mod func(*corev1.Probe)) *corev1.Probe {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{name, t.String()}}}}
	if mod != nil {
		mod(p)
	}
	return p
}

// ctr is a container with the given probe types (default specs).
func ctr(name string, types ...Type) corev1.Container {
	c := corev1.Container{Name: name}
	for _, t := range types {
		switch t {
		case Liveness:
			c.LivenessProbe = spec(name, t, nil)
		case Readiness:
			c.ReadinessProbe = spec(name, t, nil)
		case Startup:
			c.StartupProbe = spec(name, t, nil)
		}
	}
	return c
}

func testPod(uid string, cs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "ns", UID: types.UID(uid)},
		Spec:       corev1.PodSpec{Containers: cs},
	}
}

type harness struct {
	t     *testing.T
	clock *testclock.FakeClock
	p     *scripted
	m     *Manager
	ctx   context.Context
}

func newHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		clock: testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		p:     newScripted(),
		ctx:   context.Background(),
	}
	// One probe at a time: probes due together run in the order their
	// workers were created (per container: startup, readiness, liveness).
	o := Options{Prober: h.p, Clock: h.clock, NoStartJitter: true, MaxConcurrentProbes: 1}
	if mod != nil {
		mod(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return h
}

func (h *harness) sync() {
	h.t.Helper()
	if _, err := h.m.SyncOnce(h.ctx); err != nil {
		h.t.Fatal(err)
	}
}

// step moves the clock by d and runs what fell due.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	h.clock.Step(d)
	h.sync()
}

func (h *harness) status(uid string, cs ...corev1.ContainerStatus) {
	h.m.SetPodStatus(types.UID(uid), &corev1.PodStatus{PodIP: "127.0.0.1", Phase: corev1.PodRunning, ContainerStatuses: cs})
}

func (h *harness) running(name, id string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, ContainerID: "fake://" + id,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(h.clock.Now())}}}
}

func (h *harness) want(uid, name string, t Type, want Result, wantOK bool) {
	h.t.Helper()
	got, ok := h.m.Result(types.UID(uid), name, t)
	if got != want || ok != wantOK {
		h.t.Errorf("%s %s %v: got %v,%v want %v,%v", uid, name, t, got, ok, want, wantOK)
	}
}

func (h *harness) wantCalls(name string, t Type, n int) {
	h.t.Helper()
	if got := h.p.count(name, t); got != n {
		h.t.Errorf("%s %v probed %d times, want %d", name, t, got, n)
	}
}

func TestInitialResults(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	h.p.set("c", Startup, Failure)
	h.m.AddPod(testPod("u", ctr("c", Liveness, Readiness, Startup)))
	if n := h.m.WorkerCount(); n != 3 {
		t.Fatalf("%d workers", n)
	}
	h.sync() // no status yet: nothing
	h.want("u", "c", Liveness, Unknown, false)
	h.status("u", h.running("c", "1"))
	h.step(10 * time.Second)
	h.want("u", "c", Liveness, Success, true)
	h.want("u", "c", Readiness, Failure, true)
	h.want("u", "c", Startup, Unknown, true)
	h.wantCalls("c", Startup, 1)
	h.wantCalls("c", Liveness, 0)
	h.wantCalls("c", Readiness, 0)
}

func TestFailureThresholdAndHold(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	h.m.AddPod(testPod("u", ctr("c", Liveness)))
	h.status("u", h.running("c", "1"))
	h.sync()
	h.wantCalls("c", Liveness, 1)
	h.p.set("c", Liveness, Failure)
	for i := 1; i <= 2; i++ {
		h.step(10 * time.Second)
		h.want("u", "c", Liveness, Success, true) // below failureThreshold 3
	}
	h.step(10 * time.Second)
	h.want("u", "c", Liveness, Failure, true)
	h.wantCalls("c", Liveness, 4)
	// On hold until the container is replaced.
	h.step(10 * time.Second)
	h.step(10 * time.Second)
	h.wantCalls("c", Liveness, 4)
	h.want("u", "c", Liveness, Failure, true)
	// A new container: initial result, probing resumes.
	h.p.set("c", Liveness, Success)
	h.status("u", h.running("c", "2"))
	h.step(10 * time.Second)
	h.wantCalls("c", Liveness, 5)
	u, _ := h.m.Latest("u", "c", Liveness)
	if u.ContainerID != "fake://2" || u.Result != Success {
		t.Errorf("latest %+v", u)
	}
}

func TestSuccessThresholdReadiness(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	c := ctr("c")
	c.ReadinessProbe = spec("c", Readiness, func(p *corev1.Probe) { p.SuccessThreshold = 2; p.FailureThreshold = 2; p.PeriodSeconds = 5 })
	h.m.AddPod(testPod("u", c))
	h.status("u", h.running("c", "1"))
	h.sync()
	h.want("u", "c", Readiness, Failure, true) // one success of two
	h.step(5 * time.Second)
	h.want("u", "c", Readiness, Success, true)
	h.p.set("c", Readiness, Failure)
	h.step(5 * time.Second)
	h.want("u", "c", Readiness, Success, true)
	h.step(5 * time.Second)
	h.want("u", "c", Readiness, Failure, true)
	// Readiness is not held after a failure.
	h.p.set("c", Readiness, Success)
	h.step(5 * time.Second)
	h.step(5 * time.Second)
	h.want("u", "c", Readiness, Success, true)
	h.wantCalls("c", Readiness, 6)
}

func TestPeriodAndTimingOptions(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	c := ctr("c")
	c.LivenessProbe = spec("c", Liveness, func(p *corev1.Probe) { p.PeriodSeconds = 3; p.InitialDelaySeconds = 7 })
	h.m.AddPod(testPod("u", c))
	h.status("u", h.running("c", "1"))
	for range 6 { // t = 0,1,...,5s after start: in the initial delay
		h.sync()
		h.clock.Step(time.Second)
	}
	h.wantCalls("c", Liveness, 0) // due (and skipped) at 0 and 3
	h.sync()                      // t=6: due, still < 7
	h.wantCalls("c", Liveness, 0)
	h.step(3 * time.Second) // t=9
	h.wantCalls("c", Liveness, 1)
	for range 10 {
		h.step(3 * time.Second)
	}
	h.wantCalls("c", Liveness, 11)
	// Timeout reaches the prober through the spec.
	if w := h.m.workers[workerKey{"u", "c", Liveness}]; w.spec.TimeoutSeconds != 1 || w.spec.FailureThreshold != 3 {
		t.Errorf("defaults not applied: %+v", w.spec)
	}
}

func TestStartupGating(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	h.p.set("c", Startup, Failure)
	h.m.AddPod(testPod("u", ctr("c", Liveness, Readiness, Startup)))
	h.status("u", h.running("c", "1"))
	h.sync()
	h.step(10 * time.Second)
	h.wantCalls("c", Startup, 2)
	h.wantCalls("c", Liveness, 0)
	h.wantCalls("c", Readiness, 0)
	h.want("u", "c", Startup, Unknown, true)
	h.p.set("c", Startup, Success)
	h.step(10 * time.Second)
	h.want("u", "c", Startup, Success, true)
	// Started: the startup probe holds, the others run (the first time in
	// the same round, right after it).
	h.wantCalls("c", Liveness, 1)
	h.wantCalls("c", Readiness, 1)
	h.step(10 * time.Second)
	h.step(10 * time.Second)
	h.wantCalls("c", Startup, 3)
	h.wantCalls("c", Liveness, 3)
	h.wantCalls("c", Readiness, 3)
	h.want("u", "c", Readiness, Success, true)

	// A new container starts over: gated again until its startup probe passes.
	h.p.set("c", Startup, Failure)
	h.status("u", h.running("c", "2"))
	for range 3 {
		h.step(10 * time.Second)
	}
	h.want("u", "c", Startup, Failure, true) // failureThreshold 3 reached
	h.want("u", "c", Readiness, Failure, true)
	h.want("u", "c", Liveness, Success, true)
	h.wantCalls("c", Liveness, 3)
	h.wantCalls("c", Readiness, 3)
	// Startup failure holds too.
	h.step(10 * time.Second)
	h.wantCalls("c", Startup, 6)
}

func TestUpdatePodStatus(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	pod := testPod("u", ctr("c", Readiness, Startup), ctr("plain"))
	h.m.AddPod(pod)
	st := &corev1.PodStatus{PodIP: "127.0.0.1", ContainerStatuses: []corev1.ContainerStatus{h.running("c", "1"), h.running("plain", "2")}}
	h.m.SetPodStatus("u", st)
	h.p.set("c", Readiness, Failure)
	h.sync() // startup succeeds at once (threshold 1); readiness fails, due again at 250ms
	h.clock.Step(100 * time.Millisecond)
	out := st.DeepCopy()
	h.m.UpdatePodStatus(pod, out)
	c, plain := out.ContainerStatuses[0], out.ContainerStatuses[1]
	if !*c.Started || c.Ready || !*plain.Started || !plain.Ready {
		t.Fatalf("started %v ready %v; plain started %v ready %v", *c.Started, c.Ready, *plain.Started, plain.Ready)
	}
	// The readiness probe was triggered: it runs now (t=100ms), not when it
	// was due (250ms).
	h.p.set("c", Readiness, Success)
	h.wantCalls("c", Readiness, 1)
	h.sync()
	h.wantCalls("c", Readiness, 2)
	out = st.DeepCopy()
	h.m.UpdatePodStatus(pod, out)
	if !out.ContainerStatuses[0].Ready {
		t.Error("not ready after a successful readiness probe")
	}
	// Its period restarted from the triggered run: next at 10.1s.
	h.step(9800 * time.Millisecond)
	h.wantCalls("c", Readiness, 2)
	h.step(200 * time.Millisecond)
	h.wantCalls("c", Readiness, 3)
}

// A container that starts after its readiness worker looked (and found no
// container) is probed as soon as its status arrives, not a period later;
// a trigger that comes while the worker runs makes it run again at once.
func TestReadinessProbedWhenContainerStarts(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	pod := testPod("u", ctr("c", Readiness))
	h.m.AddPod(pod)
	h.sync() // no container yet: next look in a period
	h.wantCalls("c", Readiness, 0)
	h.clock.Step(100 * time.Millisecond)
	h.status("u", h.running("c", "1"))
	h.sync()
	h.wantCalls("c", Readiness, 1)
	h.want("u", "c", Readiness, Success, true)

	// Triggered while running: the run in flight read the pod before the
	// trigger, so the worker runs again at once.
	h2 := newHarness(t, nil)
	pod2 := testPod("v", ctr("d", Readiness))
	h2.m.AddPod(pod2)
	h2.sync()
	h2.m.mu.Lock()
	var w *worker
	for _, x := range h2.m.pods["v"].workers {
		w = x
	}
	w.running = true // as if a run were in flight
	h2.m.mu.Unlock()
	h2.status("v", h2.running("d", "1"))
	h2.m.mu.Lock()
	retrigger := w.retrigger
	w.running, w.retrigger = false, false
	h2.m.mu.Unlock()
	if !retrigger {
		t.Error("a trigger during a run was lost")
	}
}

// A readiness probe that fails in its container's first period, before the
// container was ever ready, runs again when the container's age has doubled
// (at least 250ms after), and those retries' failures record no event; once
// ready, or a period after the start, the period rules.
func TestReadinessRetriedWhileStarting(t *testing.T) {
	defer noLeaks(t)()
	rec := record.NewFakeRecorder(100)
	h := newHarness(t, func(o *Options) { o.Recorder = rec })
	h.p.set("c", Readiness, Failure)
	h.m.AddPod(testPod("u", ctr("c", Readiness)))
	h.status("u", h.running("c", "1"))
	h.sync()
	start := h.clock.Now()
	var at []time.Duration
	for h.clock.Since(start) < 30*time.Second {
		before := h.p.count("c", Readiness)
		h.step(50 * time.Millisecond)
		if h.p.count("c", Readiness) > before {
			at = append(at, h.clock.Since(start))
		}
	}
	// The container's age at each probe after the first (at 0): 250ms,
	// then doubling while the container is younger than the 10s period,
	// then every period.
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		4 * time.Second, 8 * time.Second, 16 * time.Second, 26 * time.Second}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("probed at %v after the start, want %v", at, want)
	}
	// Events: the first probe's failure and the period's, not the retries'.
	if n := len(rec.Events); n != 2 {
		t.Errorf("%d Unhealthy events, want 2 (the first probe and the 26s one)", n)
	}
	h.want("u", "c", Readiness, Failure, true)

	// Ready at the third probe (500ms); a later failure waits a period.
	h2 := readinessFailing(t, "v")
	h2.status("v", h2.running("c", "1"))
	h2.sync()
	h2.step(250 * time.Millisecond)
	h2.p.set("c", Readiness, Success)
	h2.step(250 * time.Millisecond)
	h2.want("v", "c", Readiness, Success, true)
	h2.p.set("c", Readiness, Failure)
	h2.step(10 * time.Second) // 10.5s: a period after the success
	h2.wantCalls("c", Readiness, 4)
	h2.step(5 * time.Second)
	h2.step(4900 * time.Millisecond)
	h2.wantCalls("c", Readiness, 4)
	h2.step(100 * time.Millisecond) // 20.5s
	h2.wantCalls("c", Readiness, 5)

	// A container older than the period when first probed: the period.
	h3 := readinessFailing(t, "w")
	old := h3.running("c", "1")
	h3.sync()                 // no status yet
	h3.step(11 * time.Second) // still none
	h3.status("w", old)
	h3.sync()
	h3.wantCalls("c", Readiness, 1)
	h3.stepReadiness(9900*time.Millisecond, 1)
	h3.stepReadiness(100*time.Millisecond, 2)

	// A start time in whole seconds (as the API keeps it) of a container
	// that started 900ms into its second: its age is taken from when a
	// status first showed it running, so the retry comes 250ms after the
	// first probe, not a second later.
	h4 := readinessFailing(t, "x")
	h4.step(900 * time.Millisecond)
	whole := h4.running("c", "1")
	whole.State.Running.StartedAt = metav1.NewTime(h4.clock.Now().Truncate(time.Second))
	h4.status("x", whole)
	h4.stepReadiness(0, 1)
	// The same container in a later status keeps the age it had: the
	// retries go on doubling it (probes at 1.15s, 1.4s, 1.9s), not from
	// the later status.
	h4.stepReadiness(100*time.Millisecond, 1)
	h4.status("x", whole)
	h4.stepReadiness(100*time.Millisecond, 1)
	h4.stepReadiness(50*time.Millisecond, 2)
	h4.stepReadiness(250*time.Millisecond, 3)
	h4.stepReadiness(400*time.Millisecond, 3)
	h4.stepReadiness(100*time.Millisecond, 4)
}

// readinessFailing is a harness with one pod, uid, whose container c has
// a readiness probe that fails.
func readinessFailing(t *testing.T, uid string) *harness {
	h := newHarness(t, nil)
	h.p.set("c", Readiness, Failure)
	h.m.AddPod(testPod(uid, ctr("c", Readiness)))
	return h
}

// stepReadiness steps the clock by d and checks that container c's
// readiness probe has run n times.
func (h *harness) stepReadiness(d time.Duration, n int) {
	h.t.Helper()
	h.step(d)
	h.wantCalls("c", Readiness, n)
}

func TestWorkerRemoval(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	h.m.AddPod(testPod("a", ctr("c", Liveness, Readiness, Startup)))
	h.m.AddPod(testPod("b", ctr("c", Liveness, Readiness)))
	h.m.AddPod(testPod("b", ctr("c", Liveness, Readiness))) // again: no new workers
	if n := h.m.WorkerCount(); n != 5 {
		t.Fatalf("%d workers", n)
	}
	h.status("a", h.running("c", "1"))
	h.status("b", h.running("c", "2"))
	h.sync()
	h.m.StopLivenessAndStartup("a")
	if n := h.m.WorkerCount(); n != 3 {
		t.Fatalf("%d workers after StopLivenessAndStartup", n)
	}
	h.want("a", "c", Liveness, Unknown, false)
	h.m.RemovePod("b")
	h.m.RemovePod("b")
	if n := h.m.WorkerCount(); n != 1 {
		t.Fatalf("%d workers after RemovePod", n)
	}
	h.want("b", "c", Readiness, Unknown, false)
	before := h.p.count("c", Readiness)
	h.step(10 * time.Second)
	if got := h.p.count("c", Readiness); got != before+1 { // only a's readiness
		t.Errorf("readiness probed %d times, want %d", got, before+1)
	}
	h.m.CleanupPods(map[types.UID]struct{}{"b": {}})
	if n := h.m.WorkerCount(); n != 0 || h.m.due.Len() != 0 || len(h.m.pods) != 0 {
		t.Fatalf("left: %d workers, %d scheduled, %d pods", n, h.m.due.Len(), len(h.m.pods))
	}
}

// TestRemovalCancelsProbeInFlight: removing a pod cancels its running probe
// and the cancelled probe publishes nothing.
func TestRemovalCancelsProbeInFlight(t *testing.T) {
	defer noLeaks(t)()
	started := make(chan struct{})
	var sawCancel atomic.Bool
	p := ProberFunc(func(ctx context.Context, _ *corev1.Probe, _ Target) Outcome {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return Outcome{Result: Failure, Message: "cancelled"}
	})
	h := newHarness(t, func(o *Options) { o.Prober = p })
	c := ctr("c", Liveness)
	c.LivenessProbe.FailureThreshold = 1
	h.m.AddPod(testPod("u", c))
	h.status("u", h.running("c", "1"))
	done := make(chan struct{})
	go func() { h.sync(); close(done) }()
	<-started
	h.m.RemovePod("u")
	<-done
	if !sawCancel.Load() {
		t.Error("probe not cancelled")
	}
	h.want("u", "c", Liveness, Unknown, false)
}

func TestPodAndContainerEnd(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	never := testPod("n", ctr("c", Liveness, Readiness))
	never.Spec.RestartPolicy = corev1.RestartPolicyNever
	always := testPod("a", ctr("c", Readiness))
	done := testPod("d", ctr("c", Readiness))
	h.m.AddPod(never)
	h.m.AddPod(always)
	h.m.AddPod(done)
	exited := corev1.ContainerStatus{Name: "c", ContainerID: "fake://x",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	h.m.SetPodStatus("n", &corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{exited}})
	h.m.SetPodStatus("a", &corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{exited}})
	h.m.SetPodStatus("d", &corev1.PodStatus{Phase: corev1.PodSucceeded})
	h.sync()
	if n := h.m.WorkerCount(); n != 1 {
		t.Errorf("%d workers left, want 1 (pod a's, which restarts)", n)
	}
	h.want("a", "c", Readiness, Failure, true)
	h.wantCalls("c", Readiness, 0)

	// A pod being deleted: liveness turns Success and stops.
	del := testPod("del", ctr("c", Liveness, Readiness))
	h.m.AddPod(del)
	h.status("del", h.running("c", "9"))
	h.p.set("c", Liveness, Failure)
	h.sync()
	del2 := del.DeepCopy()
	now := metav1.NewTime(h.clock.Now())
	del2.DeletionTimestamp = &now
	h.m.AddPod(del2)
	h.step(10 * time.Second)
	h.want("del", "c", Liveness, Unknown, false) // worker gone
	if _, ok := h.m.workers[workerKey{"del", "c", Readiness}]; !ok {
		t.Error("readiness worker of a terminating pod stopped")
	}
}

func TestRestartableInitContainer(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod("u", ctr("main", Readiness))
	side := ctr("side", Readiness, Startup)
	side.RestartPolicy = &always
	pod.Spec.InitContainers = []corev1.Container{side, ctr("init", Readiness)}
	h.m.AddPod(pod)
	if n := h.m.WorkerCount(); n != 3 {
		t.Fatalf("%d workers, want 3 (plain init containers get none)", n)
	}
	h.m.SetPodStatus("u", &corev1.PodStatus{
		ContainerStatuses:     []corev1.ContainerStatus{h.running("main", "1")},
		InitContainerStatuses: []corev1.ContainerStatus{h.running("side", "2")},
	})
	h.sync()
	h.want("u", "side", Startup, Success, true)
	h.step(10 * time.Second)
	h.want("u", "side", Readiness, Success, true)
}

func TestAgentRestart(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	h.p.set("c", Readiness, Failure)
	h.m.AddPod(testPod("u", ctr("c", Readiness)))
	old := h.running("c", "1")
	old.State.Running.StartedAt = metav1.NewTime(h.clock.Now().Add(-time.Hour))
	h.status("u", old)
	h.sync()
	// A container that ran before the manager started gets no initial result.
	h.want("u", "c", Readiness, Unknown, false)
	h.step(10 * time.Second)
	h.step(10 * time.Second)
	h.want("u", "c", Readiness, Failure, true)
}

// kubelet keeps a container that was Ready before the agent restarted
// Ready (the pod's Ready condition is True, the container started before the
// manager) until its readiness probe says otherwise: failureThreshold
// failures.
func TestAgentRestartKeepsReady(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, func(o *Options) { o.NoStartJitter = false })
	h.p.set("c", Readiness, Failure)
	pod := testPod("u", ctr("c", Readiness))
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	old := h.running("c", "1")
	old.State.Running.StartedAt = metav1.NewTime(h.clock.Now().Add(-time.Hour))
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{old}
	h.m.AddPod(pod)

	ready := func() bool {
		st := pod.Status.DeepCopy()
		h.m.UpdatePodStatus(pod, st)
		return st.ContainerStatuses[0].Ready
	}
	// Before its first probe (the restart jitter holds it back).
	if !ready() {
		t.Fatal("a container that was ready before the restart is not ready before its first probe")
	}
	h.sync() // UpdatePodStatus made it due: one failure, 1 of 3
	h.want("u", "c", Readiness, Success, true)
	if !ready() {
		t.Fatal("not ready after one failed probe of three")
	}
	for range 2 {
		h.step(10 * time.Second)
	}
	h.want("u", "c", Readiness, Failure, true)
	if ready() {
		t.Fatal("still ready after three failed probes")
	}

	// A pod that was not Ready is not made ready.
	h2 := newHarness(t, nil)
	pod2 := testPod("v", ctr("c", Readiness))
	pod2.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	pod2.Status.ContainerStatuses = []corev1.ContainerStatus{old}
	h2.p.set("c", Readiness, Failure)
	h2.m.AddPod(pod2)
	st := pod2.Status.DeepCopy()
	h2.m.UpdatePodStatus(pod2, st)
	if st.ContainerStatuses[0].Ready {
		t.Fatal("a container of a pod that was not Ready is ready")
	}
}

// SyncOnce returns the wait until the next probe falls due, as Run would sleep.
func TestSyncOnceReturnsNextDue(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	if wait, err := h.m.SyncOnce(h.ctx); err != nil || wait >= 0 {
		t.Fatalf("no workers: wait %v, %v; want negative (nothing scheduled)", wait, err)
	}
	h.m.AddPod(testPod("u", ctr("c", Readiness)))
	h.status("u", h.running("c", "1"))
	wait, err := h.m.SyncOnce(h.ctx)
	if err != nil || wait != 10*time.Second {
		t.Fatalf("wait %v, %v; want one period (10s)", wait, err)
	}
}

func TestStartJitter(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, func(o *Options) { o.NoStartJitter = false })
	// spread adds n pods with a liveness probe each and checks that each is
	// first probed within one period, not all in the same second.
	spread := func(what, prefix string, n int) {
		t.Helper()
		var names []string
		for i := range n {
			name := prefix + string(rune('a'+i))
			names = append(names, name)
			h.m.AddPod(testPod(name, ctr(name, Liveness)))
			h.status(name, h.running(name, name))
		}
		var firsts []int
		seen := map[string]bool{}
		for sec := range 11 {
			h.sync()
			for _, name := range names {
				if !seen[name] && h.p.count(name, Liveness) > 0 {
					seen[name] = true
					firsts = append(firsts, sec)
				}
			}
			h.clock.Step(time.Second)
		}
		if len(firsts) != n {
			t.Fatalf("%s: %d of %d probed within the first period", what, len(firsts), n)
		}
		if firsts[0] == firsts[len(firsts)-1] {
			t.Errorf("%s: every first probe at second %d: no jitter", what, firsts[0])
		}
	}
	spread("added after the manager started", "", 20)

	// After one period, a readiness worker starts at once, and liveness
	// workers are still spread over their first period.
	h.clock.Step(10 * time.Second)
	h.m.AddPod(testPod("late", ctr("late", Readiness)))
	h.status("late", h.running("late", "l"))
	h.sync()
	h.wantCalls("late", Readiness, 1)
	spread("added a period later", "late-", 10)
}

func TestErrorsPanicsEventsMetrics(t *testing.T) {
	defer noLeaks(t)()
	rec := record.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(o *Options) { o.Recorder = rec; o.Registerer = reg })
	h.p.mu.Lock()
	h.p.panics[pkey("bad", Liveness)] = true
	h.p.mu.Unlock()
	h.p.setOutcome("err", Readiness, Outcome{Result: Unknown, Err: errors.New("no such port")})
	h.p.setOutcome("warn", Readiness, Outcome{Result: Success, Warning: true, Message: "redirected"})
	h.p.set("fail", Liveness, Failure)
	h.m.AddPod(testPod("u", ctr("bad", Liveness), ctr("err", Readiness), ctr("warn", Readiness), ctr("fail", Liveness), ctr("good", Liveness)))
	h.status("u", h.running("bad", "1"), h.running("err", "2"), h.running("warn", "3"), h.running("fail", "4"), h.running("good", "5"))
	h.sync()
	h.step(10 * time.Second)
	// The panicking handler is retried like an error, and the rest go on.
	h.wantCalls("bad", Liveness, 6)
	h.wantCalls("err", Readiness, 6)
	h.wantCalls("good", Liveness, 2)
	h.want("u", "bad", Liveness, Success, true) // errors leave the result
	h.want("u", "err", Readiness, Failure, true)
	h.want("u", "warn", Readiness, Success, true)
	close(rec.Events)
	var evs []string
	for e := range rec.Events {
		evs = append(evs, e)
	}
	all := strings.Join(evs, "\n")
	for _, want := range []string{
		"Warning Unhealthy Liveness probe errored and resulted in unknown state: probe handler panicked: handler bug in bad/Liveness",
		"Warning Unhealthy Readiness probe errored and resulted in unknown state: no such port",
		"Warning ProbeWarning Readiness probe warning: redirected",
		"Warning Unhealthy Liveness probe failed: scripted Failure",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no event %q in\n%s", want, all)
		}
	}
	count := func(name string, t Type, result string) float64 {
		return testutil.ToFloat64(h.m.metrics.total.WithLabelValues(t.String(), result, name, "pod-u", "ns", "u"))
	}
	if got := count("good", Liveness, resultSuccessful); got != 2 {
		t.Errorf("good successes %v", got)
	}
	if got := count("fail", Liveness, resultFailed); got != 2 {
		t.Errorf("fail failures %v", got)
	}
	if got := count("err", Readiness, resultUnknown); got != 2 {
		t.Errorf("err unknowns %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "prober_probe_duration_seconds"); err != nil || n == 0 {
		t.Errorf("duration series %d, %v", n, err)
	}
	h.m.RemovePod("u")
	if n, _ := testutil.GatherAndCount(reg, "prober_probe_total"); n != 0 {
		t.Errorf("%d series left after RemovePod", n)
	}
}

func TestSubscribe(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := h.m.Subscribe(ctx, 100)
	h.m.AddPod(testPod("u", ctr("c", Liveness, Readiness)))
	h.status("u", h.running("c", "1"))
	h.p.set("c", Liveness, Failure)
	h.sync()
	h.step(10 * time.Second)
	h.step(10 * time.Second)
	cancel()
	var got []string
	for u := range ch { // closed after cancel
		got = append(got, u.Type.String()+"="+u.Result.String())
		if u.PodUID != "u" || u.ContainerName != "c" || u.ContainerID != "fake://1" {
			t.Errorf("update %+v", u)
		}
	}
	want := "Readiness=Failure Liveness=Success Readiness=Success Liveness=Failure"
	// Readiness and liveness of one round may come in either order.
	if len(got) != 4 || !sameSet(got, strings.Fields(want)) || got[len(got)-1] != "Liveness=Failure" {
		t.Errorf("updates %v, want %s", got, want)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

func TestConcurrencyBound(t *testing.T) {
	defer noLeaks(t)()
	var cur, peak atomic.Int32
	release := make(chan struct{})
	p := ProberFunc(func(ctx context.Context, _ *corev1.Probe, _ Target) Outcome {
		n := cur.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		<-release
		cur.Add(-1)
		return Outcome{Result: Success}
	})
	h := newHarness(t, func(o *Options) { o.Prober = p; o.MaxConcurrentProbes = 3 })
	for i := range 10 {
		name := string(rune('a' + i))
		h.m.AddPod(testPod(name, ctr("c", Liveness)))
		h.status(name, h.running("c", name))
	}
	done := make(chan struct{})
	go func() { h.sync(); close(done) }()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "three probes running at once", func() bool { return cur.Load() >= 3 })
	close(release)
	<-done
	if peak.Load() != 3 {
		t.Errorf("peak concurrency %d, want 3", peak.Load())
	}
}

func TestRunUnderFakeClock(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	h.p.set("c", Liveness, Failure)
	c := ctr("c", Liveness)
	c.LivenessProbe.FailureThreshold = 2
	h.m.AddPod(testPod("u", c))
	h.status("u", h.running("c", "1"))
	ctx, cancel := context.WithCancel(context.Background())
	ch := h.m.Subscribe(ctx, 10)
	errc := make(chan error, 1)
	go func() { errc <- h.m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	next := func() Update {
		t.Helper()
		select {
		case u := <-ch:
			return u
		case <-time.After(10 * time.Second):
			t.Fatal("no update")
		}
		return Update{}
	}
	if u := next(); u.Result != Success { // initial, at once
		t.Fatalf("%+v", u)
	}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "Run waiting on the clock", h.clock.HasWaiters)
	if err := h.m.Run(ctx); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Run: %v", err)
	}
	h.clock.Step(10 * time.Second)
	if u := next(); u.Result != Failure || u.Message != "scripted Failure" {
		t.Fatalf("%+v", u)
	}
	if n := h.p.count("c", Liveness); n != 2 {
		t.Errorf("%d probes", n)
	}
	// A pod added while Run waits is probed without waiting for the timer.
	h.status("v", h.running("c", "2"))
	h.m.AddPod(testPod("v", ctr("c", Liveness)))
	if u := next(); u.PodUID != "v" {
		t.Fatalf("%+v", u)
	}
}

// noLeaks checks, when the returned func runs, that the test left no
// goroutine behind (those that ran before it, such as the package's
// containerd harness, are ignored).
func noLeaks(t *testing.T) func() {
	return leakcheck.Check(t)
}

func TestNewManagerOptions(t *testing.T) {
	for _, n := range []int{-1, 100001} {
		if _, err := New(Options{MaxConcurrentProbes: n}); err == nil {
			t.Errorf("MaxConcurrentProbes %d accepted", n)
		}
	}
	if _, err := New(Options{Batch: 1}); err == nil || err.Error() != "probe: Options.Batch 1ns must be in [1ms, 1s]" {
		t.Errorf("Batch 1ns: %v, want nodekit's bounds wording", err)
	}
	if _, err := New(Options{MaxConcurrentProbes: -1}); err == nil || err.Error() != "probe: Options.MaxConcurrentProbes -1 must be in [1, 100000]" {
		t.Errorf("MaxConcurrentProbes -1: %v, want nodekit's bounds wording", err)
	}
	// Two managers on one registry (two agents in one process, a fleet)
	// share the metrics instead of failing.
	reg := prometheus.NewRegistry()
	if _, err := New(Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Registerer: reg}); err != nil {
		t.Errorf("a second manager on the same registry: %v", err)
	}
}

// The wait before a worker's first probe after a restart comes from
// Options.Rand.
func TestStartJitterFromOptionsRand(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	calls := 0
	m, err := New(Options{Clock: clk, Prober: ProberFunc(func(context.Context, *corev1.Probe, Target) Outcome { return Outcome{Result: Success} }),
		Rand: func() float64 { calls++; return 0.25 }})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", ReadinessProbe: &corev1.Probe{PeriodSeconds: 8, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}}}}}
	m.AddPod(pod)
	m.mu.Lock()
	w := m.workers[workerKey{"u", "c", Readiness}]
	next := w.next
	m.mu.Unlock()
	if calls != 1 || !next.Equal(clk.Now().Add(2*time.Second)) {
		t.Errorf("first probe due %v after %d Rand calls, want 2s (0.25 of the 8s period) after 1", next.Sub(clk.Now()), calls)
	}
}

// TestNotify: Notify's function is called on the stepping goroutine with
// every change, however many a step makes (nothing to fill up), and not
// after its context ends.
func TestNotify(t *testing.T) {
	defer noLeaks(t)()
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var got []string // no lock: SyncOnce's goroutine calls it
	h.m.Notify(ctx, func(_ context.Context, u Update) {
		got = append(got, string(u.PodUID)+" "+u.Type.String()+"="+u.Result.String())
	})
	const pods = 300
	for i := range pods {
		uid := fmt.Sprintf("u%d", i)
		h.m.AddPod(testPod(uid, ctr("c", Readiness)))
		h.status(uid, h.running("c", "1"))
	}
	// Each pod's initial result, then its first probe's, run at once.
	h.sync()
	if len(got) != 2*pods || got[0] != "u0 Readiness=Failure" || got[1] != "u0 Readiness=Success" {
		t.Fatalf("%d changes after the first step, want %d: %v", len(got), 2*pods, got[:min(len(got), 4)])
	}
	h.p.set("c", Readiness, Failure)
	for range 3 { // the default failure threshold
		h.step(10 * time.Second)
	}
	if len(got) != 3*pods || !strings.HasSuffix(got[len(got)-1], "Readiness=Failure") {
		t.Fatalf("%d changes after the probes failed, want %d (last %q)", len(got), 3*pods, got[len(got)-1])
	}
	cancel()
	h.p.set("c", Readiness, Success)
	h.step(10 * time.Second)
	h.step(10 * time.Second)
	if len(got) != 3*pods {
		t.Errorf("%d changes after the context ended, want %d", len(got), 3*pods)
	}
}
