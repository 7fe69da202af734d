package podsync_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/internal/synctest"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// countingRelister counts the CRI syncer's relists, pod relists and health
// checks, and signals each on done (when set).
type countingRelister struct {
	*cri.Syncer
	relists, podRelists, checks atomic.Int64
	done                        chan struct{}
}

func (c *countingRelister) signal() {
	if c.done != nil {
		select {
		case c.done <- struct{}{}:
		default:
		}
	}
}

func (c *countingRelister) Relist(ctx context.Context) (map[types.UID]*podsync.PodState, error) {
	defer c.signal()
	c.relists.Add(1)
	return c.Syncer.Relist(ctx)
}

func (c *countingRelister) RelistPod(ctx context.Context, uid types.UID) (*podsync.PodState, error) {
	c.podRelists.Add(1)
	return c.Syncer.RelistPod(ctx, uid)
}

func (c *countingRelister) CheckHealth(ctx context.Context) error {
	defer c.signal()
	c.checks.Add(1)
	return c.Syncer.CheckHealth(ctx)
}

// eventHarness runs an engine on the fake (events on or off) under Run.
type eventHarness struct {
	*harness
	rl   *countingRelister
	logs *synctest.LogLines
	stop func()
}

// newEventHarness starts the engine after setup (if any) prepared the fake.
func newEventHarness(t *testing.T, events bool, setup ...func(*runtimetest.Runtime)) *eventHarness {
	t.Helper()
	return newEventHarnessWith(t, events, nil, setup...)
}

// newEventHarnessWith is newEventHarness with the engine's podsync.Options changed
// by opts (when not nil).
func newEventHarnessWith(t *testing.T, events bool, opts func(*podsync.Options), setup ...func(*runtimetest.Runtime)) *eventHarness {
	t.Helper()
	h := &eventHarness{harness: newHarness(t), logs: &synctest.LogLines{}}
	h.RT.SetContainerEvents(events)
	for _, f := range setup {
		f(h.RT)
	}
	h.rl = &countingRelister{Syncer: h.Syncer}
	var err error
	o := podsync.Options{Syncer: h.Syncer, Relister: h.rl, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"}}
	if opts != nil {
		opts(&o)
	}
	h.Eng, err = podsync.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), h.logs.Logger()))
	done := make(chan error, 1)
	go func() { done <- h.Eng.Run(ctx) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

func (h *eventHarness) eventually(what string, cond func() bool) {
	h.t.Helper()
	testenv.Eventually(h.t, 10*time.Second, time.Millisecond, what, cond)
}

// evSnapshot is the engine's event state.
type evSnapshot struct {
	state      podsync.EvState
	got        bool
	evented    bool
	nextRelist time.Time
	retryAt    time.Time
}

func (h *eventHarness) ev() evSnapshot {
	var s evSnapshot
	s.state, s.got, s.evented, s.nextRelist, s.retryAt = podsync.EventState(h.Eng)
	return s
}

func (h *eventHarness) watchCalls() int { return h.RT.CallCount("WatchContainerEvents") }

// step advances the clock by d and waits until the engine has done the
// relist or health check then due: its next one is later.
func (h *eventHarness) step(d time.Duration) {
	h.t.Helper()
	h.Clock.Step(d)
	now := h.Clock.Now()
	h.eventually("a relist or health check", func() bool {
		next, relistNow := podsync.NextObservation(h.Eng)
		return next.After(now) && !relistNow
	})
}

// runningPod starts a pod of one container and waits until events are in
// use, and returns the pod and its container's ID.
func (h *eventHarness) runningPod() (*corev1.Pod, string) {
	h.t.Helper()
	h.eventually("the event stream open", func() bool { return h.RT.ContainerEventStreams() == 1 })
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.eventually("pod Running", func() bool {
		return h.Writer.Last(pod.UID).Phase == corev1.PodRunning && len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)) == 1
	})
	h.eventually("an event", func() bool { return h.ev().got })
	if !h.ev().evented {
		h.step(podsync.DefaultRelistPeriod) // the first relist that finds the stream up
	}
	if ev := h.ev(); !ev.evented || !ev.nextRelist.Equal(h.Clock.Now().Add(podsync.DefaultEventedRelistPeriod)) {
		h.t.Fatalf("events not in use: %+v at %v", ev, h.Clock.Now())
	}
	return pod, h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)[0].Id
}

// With events, a container's exit is seen and the container restarted
// without the clock moving, and without a full relist.
func TestEngineEventsRestartAtOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newEventHarness(t, true)
	defer h.stop()
	pod, id := h.runningPod()
	now, relists := h.Clock.Now(), h.rl.relists.Load()
	if err := h.RT.Exit(id, 1); err != nil {
		t.Fatal(err)
	}
	h.eventually("container restarted", func() bool {
		s := h.Writer.Last(pod.UID)
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].RestartCount == 1 && s.ContainerStatuses[0].State.Running != nil
	})
	if got := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING); len(got) != 1 || got[0].Id == id {
		t.Errorf("running containers %v, want one new", got)
	}
	if !h.Clock.Now().Equal(now) {
		t.Errorf("clock moved")
	}
	if n := h.rl.relists.Load(); n != relists {
		t.Errorf("%d full relists after the exit, want none (pod relists: %d)", n-relists, h.rl.podRelists.Load())
	}
	if h.rl.podRelists.Load() == 0 {
		t.Error("no pod relist")
	}
	if n := h.logs.Count("Container events in use"); n != 1 {
		t.Errorf("%d logs of events in use, want 1: %v", n, h.logs.Lines())
	}
}

// With events, sources that become ready after the last relist have their
// orphans found at the next health check (1s), not at the next full relist
// (300s): a sandbox that no source knows is stopped and removed.
func TestEngineEventsOrphansOnceSourcesReady(t *testing.T) {
	defer leakcheck.Check(t)()
	var orphan string
	h := newEventHarnessWith(t, true, func(o *podsync.Options) { o.Sources = []string{podsource.APISource} }, func(rt *runtimetest.Runtime) {
		labels := map[string]string{cri.LabelPodUID: "uid-orphan", cri.LabelPodName: "orphan", cri.LabelPodNamespace: "default"}
		var err error
		orphan, err = rt.RunPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "orphan", Namespace: "default", Uid: "uid-orphan"}, Labels: labels}, "")
		if err != nil {
			t.Fatal(err)
		}
	})
	defer h.stop()
	h.runningPod()
	if h.Eng.State("uid-orphan") == nil {
		t.Fatal("the orphan's sandbox not observed")
	}
	relists := h.rl.relists.Load()
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource}) // the API source's first (empty) set
	h.step(time.Second)
	h.eventually("the orphan's sandbox removed", func() bool {
		_, err := h.RT.PodSandboxStatus(context.Background(), orphan, false)
		return err != nil
	})
	if n := h.rl.relists.Load() - relists; n != 1 {
		t.Errorf("%d full relists once the sources were ready, want 1", n)
	}
}

// While the stream is up the relist runs every 300s and the health check
// every 1s, which asks the runtime's status every 5s
// (cri.DefaultStatusPeriod).
func TestEngineEventsSlowRelist(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newEventHarness(t, true)
	defer h.stop()
	h.runningPod()
	start, relists, checks := h.Clock.Now(), h.rl.relists.Load(), h.rl.checks.Load()
	for range 10 {
		h.step(time.Second)
	}
	if n := h.rl.relists.Load() - relists; n != 0 {
		t.Errorf("%d relists in 10s with events", n)
	}
	if n := h.rl.checks.Load() - checks; n != 10 {
		t.Errorf("%d health checks in 10s, want 10", n)
	}
	if _, at, err := h.Syncer.LatestRuntimeStatus(); err != nil || h.Clock.Since(at) >= cri.DefaultStatusPeriod || at.Before(start.Add(5*time.Second)) {
		t.Errorf("runtime status from %v (%v), want within %v of now (%v)", at, err, cri.DefaultStatusPeriod, h.Clock.Now())
	}
	h.step(podsync.DefaultEventedRelistPeriod - 10*time.Second)
	h.eventually("the 300s relist", func() bool { return h.rl.relists.Load() == relists+1 })
	if ev := h.ev(); !ev.nextRelist.Equal(start.Add(2 * podsync.DefaultEventedRelistPeriod)) {
		t.Errorf("next relist at %v, want %v", ev.nextRelist.Sub(start), 2*podsync.DefaultEventedRelistPeriod)
	}
}

// A failed stream brings back the 1s relist at once and is retried after
// 1s, 2s, 4s; a stream that stays open a relist period slows the relist
// again. Each change is logged once.
func TestEngineEventsStreamFailure(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newEventHarness(t, true)
	defer h.stop()
	h.runningPod()
	unavailable := status.Error(codes.Unavailable, "runtime restarting")
	fail := runtimetest.Errors(unavailable, unavailable)
	h.RT.SetHooks(runtimetest.Hooks{WatchContainerEvents: func(context.Context, func(*runtimeapi.ContainerEventResponse)) error { return fail() }})
	relists, watches := h.rl.relists.Load(), h.watchCalls()
	h.RT.EndContainerEvents(unavailable)
	// The relister counts a relist when it is called; the engine takes
	// its answer in (and sets the next relist) after that.
	now := h.Clock.Now()
	h.eventually("a relist at once, the 1s relist and the retry armed", func() bool {
		ev := h.ev()
		return h.rl.relists.Load() == relists+1 && !ev.evented && ev.nextRelist.Equal(now.Add(time.Second)) &&
			ev.state == podsync.EvDown && ev.retryAt.Equal(now.Add(time.Second))
	})
	// Retries after 1s, 2s (both fail) and 4s (open); relists every 1s.
	for i, w := range []struct {
		watches int
		state   podsync.EvState
	}{{1, podsync.EvDown}, {1, podsync.EvDown}, {2, podsync.EvDown}, {2, podsync.EvDown}, {2, podsync.EvDown}, {2, podsync.EvDown}, {3, podsync.EvWatching}} {
		h.step(time.Second)
		h.eventually("the retry", func() bool {
			ev := h.ev()
			return h.watchCalls() == watches+w.watches && ev.state == w.state && (w.state == podsync.EvWatching || ev.retryAt.After(h.Clock.Now()))
		})
		if n := h.rl.relists.Load(); n != relists+1+int64(i+1) {
			t.Errorf("second %d: %d relists, want %d", i+1, n-relists, i+2)
		}
	}
	h.eventually("stream open", func() bool { return h.RT.ContainerEventStreams() == 1 })
	if h.ev().evented {
		t.Error("events in use before the stream proved itself")
	}
	h.step(time.Second) // open for 1s, no event: in use
	if ev := h.ev(); !ev.evented || !ev.nextRelist.Equal(h.Clock.Now().Add(podsync.DefaultEventedRelistPeriod)) {
		t.Errorf("after the stream came back: %+v", ev)
	}
	if n := h.logs.Count("Container events stream failed;"); n != 1 {
		t.Errorf("%d logs of the failure, want 1: %v", n, h.logs.Lines())
	}
	// The relist that finds the stream proven logs after it has set the
	// state read above: wait for the line.
	h.eventually("events in use logged again", func() bool { return h.logs.Count("Container events in use") >= 2 })
	if n := h.logs.Count("Container events in use"); n != 2 {
		t.Errorf("%d logs of events in use, want 2: %v", n, h.logs.Lines())
	}
}

// Unimplemented: one attempt, then relists every 1s; a container exit is
// seen by the next relist.
func TestEngineEventsUnimplemented(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newEventHarness(t, false)
	defer h.stop()
	h.eventually("the answer", func() bool {
		return podsync.EvDownLogged(h.Eng)
	})
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.eventually("pod Running", func() bool { return h.Writer.Last(pod.UID).Phase == corev1.PodRunning })
	relists := h.rl.relists.Load()
	for range 120 {
		h.step(time.Second)
	}
	if n := h.rl.relists.Load() - relists; n != 120 {
		t.Errorf("%d relists in 2 minutes, want 120", n)
	}
	if n := h.watchCalls(); n != 1 {
		t.Errorf("%d WatchContainerEvents calls, want 1", n)
	}
	if ev := h.ev(); ev.evented || ev.state != podsync.EvNone {
		t.Errorf("%+v", ev)
	}
	if n := h.logs.Count("The container runtime has no container events"); n != 1 {
		t.Errorf("%d logs, want 1: %v", n, h.logs.Lines())
	}
	id := h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)[0].Id
	if err := h.RT.Exit(id, 1); err != nil {
		t.Fatal(err)
	}
	h.step(time.Second)
	h.eventually("container restarted", func() bool {
		s := h.Writer.Last(pod.UID)
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].RestartCount == 1
	})
}

// A stream that always fails is retried with back-off up to once a
// minute: no hot loop over ten simulated minutes.
func TestEngineEventsNoHotLoop(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newEventHarness(t, true, func(rt *runtimetest.Runtime) {
		rt.SetHooks(runtimetest.Hooks{WatchContainerEvents: func(context.Context, func(*runtimeapi.ContainerEventResponse)) error {
			return status.Error(codes.Unavailable, "down")
		}})
	})
	defer h.stop()
	h.eventually("the first failure", func() bool { return h.ev().state == podsync.EvDown })
	for range 60 {
		now := h.Clock.Now()
		h.eventually("retry armed", func() bool { ev := h.ev(); return ev.state == podsync.EvDown && ev.retryAt.After(now) })
		h.step(10 * time.Second)
	}
	// Attempts at 0, 1, 3, 7, 15, 31, 63, 123, 183, … s: 16 in 600s, here
	// at 10s steps.
	n := h.watchCalls()
	if n < 8 || n > 18 {
		t.Errorf("%d WatchContainerEvents calls in 10 simulated minutes, want 8–18", n)
	}
	t.Logf("%d WatchContainerEvents calls in 10 simulated minutes", n)
	if n := h.logs.Count("Container events stream failed;"); n != 1 {
		t.Errorf("%d logs of the failure, want 1", n)
	}
}
