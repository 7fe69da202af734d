package eviction_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/eviction/evictiontest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a manager on fakes. Pods evicted leave the active pods.
type fixture struct {
	m        *eviction.Manager
	clock    *clocktesting.FakeClock
	obs      *evictiontest.Observer
	killer   *evictiontest.Killer
	recorder *record.FakeRecorder
	reg      *prometheus.Registry
	ctx      context.Context // logs to the test

	mu   sync.Mutex
	pods []*corev1.Pod
}

func newFixture(t testing.TB, o eviction.Options, snap eviction.Snapshot, pods ...*corev1.Pod) *fixture {
	t.Helper()
	f := &fixture{
		clock:    clocktesting.NewFakeClock(t0),
		obs:      evictiontest.NewObserver(snap),
		killer:   &evictiontest.Killer{},
		recorder: record.NewFakeRecorder(1000),
		reg:      prometheus.NewRegistry(),
		pods:     pods,
	}
	_, f.ctx = ktesting.NewTestContext(t)
	f.killer.OnEvict = func(e evictiontest.Eviction) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pods = slices.DeleteFunc(f.pods, func(p *corev1.Pod) bool { return p.UID == e.Pod.UID })
	}
	o.NodeName = "node-1"
	o.Observer = f.obs
	o.Killer = f.killer
	o.ActivePods = func() []*corev1.Pod {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Clone(f.pods)
	}
	o.Clock = f.clock
	o.Registerer = f.reg
	o.Recorder = f.recorder
	m, err := eviction.New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func (f *fixture) sync(t testing.TB) {
	t.Helper()
	if _, err := f.m.SyncOnce(f.ctx); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) evicted() []string {
	var out []string
	for _, e := range f.killer.Evictions() {
		out = append(out, e.Pod.Name)
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func memory(avail, workingSet uint64) *eviction.MemoryStats {
	return &eviction.MemoryStats{AvailableBytes: avail, WorkingSetBytes: workingSet}
}

func TestNewValidates(t *testing.T) {
	ok := eviction.Options{NodeName: "n", Observer: evictiontest.NewObserver(eviction.Snapshot{}),
		Killer: &evictiontest.Killer{}, ActivePods: func() []*corev1.Pod { return nil }}
	for name, tt := range map[string]struct {
		edit func(*eviction.Options)
		want string
	}{
		"node name":        {func(o *eviction.Options) { o.NodeName = "" }, "NodeName is required"},
		"observer":         {func(o *eviction.Options) { o.Observer = nil }, "Observer is required"},
		"active pods":      {func(o *eviction.Options) { o.ActivePods = nil }, "ActivePods is required"},
		"killer":           {func(o *eviction.Options) { o.Killer = nil }, "Killer is required"},
		"bad threshold":    {func(o *eviction.Options) { o.EvictionHard = map[string]string{"memory.available": "-1"} }, `evictionHard["memory.available"]`},
		"transition":       {func(o *eviction.Options) { o.PressureTransitionPeriod = 10 }, "PressureTransitionPeriod"},
		"max pod grace":    {func(o *eviction.Options) { o.MaxPodGracePeriod = -1 }, "eviction: Options.MaxPodGracePeriod -1 must be at least 0"},
		"period too short": {func(o *eviction.Options) { o.Period = time.Millisecond }, "Period"},
	} {
		o := ok
		tt.edit(&o)
		if _, err := eviction.New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", name, err, tt.want)
		}
	}
	m, err := eviction.New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Thresholds()); n != 5 {
		t.Errorf("%d default thresholds, want 5", n)
	}
	ok.EvictionHard = map[string]string{}
	if m, _ := eviction.New(ok); len(m.Thresholds()) != 0 {
		t.Errorf("empty EvictionHard: %v", m.Thresholds())
	}
}

// A hard memory threshold evicts the pod over its request, with kubelet's
// status, message, grace period, events and metric.
func TestHardMemoryEviction(t *testing.T) {
	snap := eviction.Snapshot{
		Memory: memory(50*Mi, 2*Gi),
		Pods: []eviction.PodUsage{
			memUsage("within", 50*Mi),
			memUsage("over", 200*Mi),
			memUsage("besteffort", 10*Mi),
		},
	}
	over := newPod("over", request(corev1.ResourceMemory, "100Mi"), gracePeriod(30))
	over.Generation = 3
	f := newFixture(t, eviction.Options{}, snap,
		newPod("within", request(corev1.ResourceMemory, "100Mi")), over, newPod("besteffort", priority(10)))
	f.sync(t)

	evs := f.killer.Evictions()
	if len(evs) != 1 || evs[0].Pod.Name != "over" {
		t.Fatalf("evicted %v, want [over]", f.evicted())
	}
	e := evs[0]
	const msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container app was using 200Mi, request is 100Mi, has larger consumption of memory. "
	if e.Status.Phase != corev1.PodFailed || e.Status.Reason != "Evicted" || e.Status.Message != msg {
		t.Errorf("status %q %q %q", e.Status.Phase, e.Status.Reason, e.Status.Message)
	}
	if e.GracePeriod != 1 {
		t.Errorf("grace period %d, want 1", e.GracePeriod)
	}
	if len(e.Status.Conditions) != 1 {
		t.Fatalf("conditions %+v", e.Status.Conditions)
	}
	c := e.Status.Conditions[0]
	if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue || c.Reason != "TerminationByKubelet" ||
		c.Message != msg || c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("condition %+v", c)
	}
	wantEvents := []string{
		"Warning EvictionThresholdMet Attempting to reclaim memory",
		"Warning Evicted " + msg + " map[offending_containers:app offending_containers_usage:200Mi starved_resource:memory]",
	}
	if got := f.events(); !slices.Equal(got, wantEvents) {
		t.Errorf("events %q, want %q", got, wantEvents)
	}
	if n := testutil.ToFloat64(counter(t, f.reg, "memory.available")); n != 1 {
		t.Errorf("kubelet_evictions{memory.available} = %v", n)
	}
	if s := f.m.State(); !slices.Equal(s.Conditions, []corev1.NodeConditionType{corev1.NodeMemoryPressure}) || len(s.Met) != 1 {
		t.Errorf("state %+v", s)
	}
	if !f.m.IsUnderMemoryPressure() || f.m.IsUnderDiskPressure() || f.m.IsUnderPIDPressure() {
		t.Error("pressure flags")
	}
}

func counter(t testing.TB, reg *prometheus.Registry, signal string) prometheus.Collector {
	t.Helper()
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "evictions",
		Help: "Cumulative number of pod evictions by eviction signal."}, []string{"eviction_signal"})
	if err := reg.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			t.Fatal(err)
		}
		vec = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return vec.WithLabelValues(signal)
}

// At most one pod per sync; critical pods are never evicted, even when they
// rank first; with only critical pods left, nothing is evicted.
func TestOnePodPerSyncAndCriticalSkipped(t *testing.T) {
	snap := eviction.Snapshot{Memory: memory(10*Mi, 2*Gi), Pods: []eviction.PodUsage{
		memUsage("static", 900*Mi), memUsage("critical", 800*Mi), memUsage("a", 300*Mi), memUsage("b", 200*Mi),
	}}
	f := newFixture(t, eviction.Options{}, snap,
		newPod("static", static()), newPod("critical", priority(2000001000)), newPod("b"), newPod("a"))
	f.sync(t)
	if got := f.evicted(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after one sync evicted %v, want [a]", got)
	}
	f.sync(t)
	f.sync(t)
	if got := f.evicted(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("evicted %v, want [a b]", got)
	}
}

// A soft threshold reports the condition at once but evicts only once its
// grace period has held; the grace period is min(MaxPodGracePeriod, the
// pod's terminationGracePeriodSeconds). A threshold that clears in between
// starts its grace period again.
func TestSoftGracePeriod(t *testing.T) {
	snap := eviction.Snapshot{Memory: memory(300*Mi, 2*Gi), Pods: []eviction.PodUsage{memUsage("a", 500*Mi), memUsage("b", 400*Mi)}}
	f := newFixture(t, eviction.Options{
		EvictionHard:            map[string]string{},
		EvictionSoft:            map[string]string{"memory.available": "500Mi"},
		EvictionSoftGracePeriod: map[string]string{"memory.available": "90s"},
		MaxPodGracePeriod:       30,
	}, snap, newPod("a", gracePeriod(10)), newPod("b"))

	f.sync(t)
	if !f.m.IsUnderMemoryPressure() || len(f.m.State().Met) != 0 || len(f.evicted()) != 0 {
		t.Fatalf("at once: state %+v evicted %v", f.m.State(), f.evicted())
	}
	f.clock.Step(60 * time.Second)
	f.obs.Update(func(s *eviction.Snapshot) { s.Memory.AvailableBytes = 600 * Mi }) // clears
	f.sync(t)
	f.obs.Update(func(s *eviction.Snapshot) { s.Memory.AvailableBytes = 300 * Mi }) // met again: grace restarts
	f.clock.Step(60 * time.Second)
	f.sync(t)
	f.clock.Step(89 * time.Second)
	f.sync(t)
	if got := f.evicted(); len(got) != 0 {
		t.Fatalf("evicted %v before the grace period", got)
	}
	f.clock.Step(time.Second)
	f.sync(t)
	f.sync(t)
	evs := f.killer.Evictions()
	if len(evs) != 2 || evs[0].Pod.Name != "a" || evs[0].GracePeriod != 10 || evs[1].Pod.Name != "b" || evs[1].GracePeriod != 30 {
		t.Fatalf("evictions %+v", evs)
	}
	if !strings.HasPrefix(evs[0].Status.Message, "The node was low on resource: memory. Threshold quantity: 500Mi, available: 300Mi. ") {
		t.Errorf("message %q", evs[0].Status.Message)
	}
}

// A pressure condition stays for the transition period after its last
// threshold cleared.
func TestPressureTransitionPeriod(t *testing.T) {
	snap := eviction.Snapshot{PIDs: &eviction.PIDStats{MaxPID: 1000, Running: 950}}
	f := newFixture(t, eviction.Options{
		EvictionHard:             map[string]string{"pid.available": "10%"},
		PressureTransitionPeriod: time.Minute,
	}, snap)
	f.sync(t)
	if !f.m.IsUnderPIDPressure() {
		t.Fatal("no PIDPressure while 50 of 1000 PIDs are left")
	}
	f.obs.Update(func(s *eviction.Snapshot) { s.PIDs.Running = 100 })
	f.clock.Step(59 * time.Second)
	f.sync(t)
	if !f.m.IsUnderPIDPressure() {
		t.Fatal("PIDPressure cleared before the transition period")
	}
	f.clock.Step(time.Second)
	f.sync(t)
	if f.m.IsUnderPIDPressure() {
		t.Fatal("PIDPressure still set after the transition period")
	}
}

// For a disk signal the reclaimers run first; when they free enough,
// nothing is evicted; when not, the largest user is.
func TestReclaimBeforeEvict(t *testing.T) {
	disk := func() eviction.Snapshot {
		return eviction.Snapshot{
			NodeFS: &eviction.FsStats{AvailableBytes: 5 * Gi, CapacityBytes: 100 * Gi, InodesFree: 1e6, Inodes: 1e6},
			Pods:   []eviction.PodUsage{diskUsage("small", 10*Mi, 0, 0), diskUsage("big", Gi, 100*Mi, 0)},
		}
	}
	t.Run("reclaimed enough", func(t *testing.T) {
		f := newFixture(t, eviction.Options{}, disk(), newPod("small"), newPod("big"))
		r := &evictiontest.Reclaimer{Func: func(context.Context, eviction.Signal) (uint64, error) {
			f.obs.Update(func(s *eviction.Snapshot) { s.NodeFS.AvailableBytes = 50 * Gi })
			return 45 * Gi, nil
		}}
		f.m = mustNew(t, f, eviction.Options{Reclaimers: []eviction.Reclaimer{r}})
		f.sync(t)
		if got := r.Calls(); !slices.Equal(got, []eviction.Signal{eviction.SignalNodeFsAvailable}) {
			t.Errorf("reclaimed for %v", got)
		}
		if f.obs.Calls() != 2 || len(f.evicted()) != 0 {
			t.Errorf("observed %d times, evicted %v; want 2 and none", f.obs.Calls(), f.evicted())
		}
		if !f.m.IsUnderDiskPressure() {
			t.Error("DiskPressure is reported for the sync whose observation met the threshold")
		}
	})
	t.Run("not enough", func(t *testing.T) {
		f := newFixture(t, eviction.Options{}, disk(), newPod("small"), newPod("big"))
		failing := &evictiontest.Reclaimer{Func: func(context.Context, eviction.Signal) (uint64, error) { return 0, errors.New("gc failed") }}
		some := &evictiontest.Reclaimer{Func: func(context.Context, eviction.Signal) (uint64, error) {
			f.obs.Update(func(s *eviction.Snapshot) { s.NodeFS.AvailableBytes = 8 * Gi })
			return 3 * Gi, nil
		}}
		f.m = mustNew(t, f, eviction.Options{Reclaimers: []eviction.Reclaimer{failing, some}})
		f.sync(t)
		if len(failing.Calls()) != 1 || len(some.Calls()) != 1 {
			t.Errorf("reclaimers called %v, %v", failing.Calls(), some.Calls())
		}
		evs := f.killer.Evictions()
		if len(evs) != 1 || evs[0].Pod.Name != "big" {
			t.Fatalf("evicted %v, want [big]", f.evicted())
		}
		// 10% is kept in float32, as kubelet keeps it: 10737418400 bytes.
		const msg = "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. Container app was using 1124Mi, request is 0, has larger consumption of ephemeral-storage. "
		if evs[0].Status.Message != msg {
			t.Errorf("message %q, want %q", evs[0].Status.Message, msg)
		}
	})
	t.Run("nodefs with a dedicated imagefs", func(t *testing.T) {
		s := disk()
		s.DedicatedImageFS = true
		f := newFixture(t, eviction.Options{}, s, newPod("small"), newPod("big"))
		r := &evictiontest.Reclaimer{}
		f.m = mustNew(t, f, eviction.Options{Reclaimers: []eviction.Reclaimer{r}})
		f.sync(t)
		if len(r.Calls()) != 0 {
			t.Errorf("reclaimed nodefs on a node with its own imagefs: %v", r.Calls())
		}
		// Logs and volumes count against nodefs then: big's 100Mi of logs.
		if got := f.evicted(); !slices.Equal(got, []string{"big"}) {
			t.Errorf("evicted %v", got)
		}
	})
}

// mustNew rebuilds f's manager with extra options on f's fakes.
func mustNew(t testing.TB, f *fixture, o eviction.Options) *eviction.Manager {
	t.Helper()
	o.NodeName = "node-1"
	o.Observer = f.obs
	o.Killer = f.killer
	o.ActivePods = func() []*corev1.Pod {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Clone(f.pods)
	}
	o.Clock = f.clock
	o.Recorder = f.recorder
	o.Registerer = f.reg
	m, err := eviction.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A threshold that drove an eviction stays met until its minimum reclaim
// is available beyond it.
func TestMinimumReclaim(t *testing.T) {
	snap := eviction.Snapshot{Memory: memory(90*Mi, 2*Gi), Pods: []eviction.PodUsage{memUsage("a", Gi), memUsage("b", Gi)}}
	f := newFixture(t, eviction.Options{
		EvictionHard:           map[string]string{"memory.available": "100Mi"},
		EvictionMinimumReclaim: map[string]string{"memory.available": "200Mi"},
	}, snap, newPod("a"), newPod("b"))
	f.sync(t)
	f.obs.Update(func(s *eviction.Snapshot) { s.Memory.AvailableBytes = 250 * Mi }) // above 100Mi, below 100Mi+200Mi
	f.sync(t)
	if got := f.evicted(); len(got) != 2 {
		t.Fatalf("evicted %v, want both pods while the minimum reclaim is not met", got)
	}
	f.obs.Update(func(s *eviction.Snapshot) { s.Memory.AvailableBytes = 300 * Mi })
	f.sync(t)
	if s := f.m.State(); len(s.Met) != 0 {
		t.Errorf("still met at 300Mi: %+v", s.Met)
	}
}

// Stale stats (the same collection time as the last sync) evict nothing.
func TestStaleStats(t *testing.T) {
	snap := eviction.Snapshot{Time: t0, Memory: memory(10*Mi, 2*Gi), Pods: []eviction.PodUsage{memUsage("a", Gi), memUsage("b", Gi)}}
	f := newFixture(t, eviction.Options{}, snap, newPod("a"), newPod("b"))
	f.clock.Step(2 * time.Second)
	f.sync(t)
	f.sync(t)
	if got := f.evicted(); len(got) != 1 {
		t.Fatalf("evicted %v on stale stats", got)
	}
	f.obs.Update(func(s *eviction.Snapshot) { s.Time = t0.Add(time.Second) })
	f.sync(t)
	if got := f.evicted(); len(got) != 2 {
		t.Fatalf("evicted %v on fresh stats", got)
	}
}

func TestErrors(t *testing.T) {
	snap := eviction.Snapshot{Memory: memory(10*Mi, 2*Gi), Pods: []eviction.PodUsage{memUsage("a", Gi)}}
	f := newFixture(t, eviction.Options{}, snap, newPod("a"))
	boom := errors.New("boom")
	f.obs.FailNext(boom)
	if _, err := f.m.SyncOnce(f.ctx); !errors.Is(err, boom) {
		t.Fatalf("observe error %v", err)
	}
	if f.m.IsUnderMemoryPressure() || len(f.evicted()) != 0 {
		t.Fatal("a failed observation changed state")
	}
	f.killer.FailNext(boom)
	if _, err := f.m.SyncOnce(f.ctx); !errors.Is(err, boom) || !strings.Contains(err.Error(), "default/a") {
		t.Fatalf("killer error %v", err)
	}
	if n := testutil.ToFloat64(counter(t, f.reg, "memory.available")); n != 1 {
		t.Errorf("a failed eviction counts as kubelet's does: %v", n)
	}
}

// No pods, or no stats at all: no panic, no eviction, conditions still set.
func TestNothingToEvict(t *testing.T) {
	f := newFixture(t, eviction.Options{}, eviction.Snapshot{Memory: memory(10*Mi, Gi)})
	f.sync(t)
	if !f.m.IsUnderMemoryPressure() || len(f.evicted()) != 0 {
		t.Fatal("want pressure and no eviction")
	}
	g := newFixture(t, eviction.Options{}, eviction.Snapshot{}, newPod("a"))
	g.sync(t)
	if g.m.IsUnderMemoryPressure() || len(g.evicted()) != 0 {
		t.Fatal("unknown signals must not be met")
	}
}
