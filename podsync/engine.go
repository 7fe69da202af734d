package podsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/podequal"
	"github.com/nodekit/nodekit/internal/randutil"
	"github.com/nodekit/nodekit/internal/timerheap"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/probe"
)

// Defaults and bounds of Options.
const (
	DefaultRelistPeriod = time.Second
	DefaultResyncPeriod = time.Minute
	DefaultErrorBackoff = 10 * time.Second
	DefaultMaxParallel  = 16
	// OrphanGracePeriod is the grace of pods that run but no source knows.
	OrphanGracePeriod = time.Second
)

// Options configure an Engine. The zero value of each field means its
// default.
type Options struct {
	// Syncer runs the pods. Required.
	Syncer PodSyncer
	// Relister observes them. Default: Syncer, if it is a Relister; else
	// required. When it is also an EventWatcher (the CRI syncer is; its
	// events are the runtime's CRI container events), Run watches its
	// events as the kubelet's evented PLEG does: an event relists its pod
	// at once, the full relist slows to EventedRelistPeriod while the stream
	// is up, and RelistPeriod resumes at once when it fails (see the
	// package documentation). To relist only, hide the method:
	// Relister: struct{ podsync.PodRelister }{cri}.
	Relister Relister
	// Writer receives every status the engine computes, PodTerminated and
	// RemovePod. Default nil: none.
	Writer StatusWriter
	// Probes is told about pods (AddPod, SetPodStatus, RemovePod), fills
	// Started and Ready, and wakes pods whose probe results change. Default
	// nil: containers are started and ready once running.
	Probes *probe.Manager
	// Triggers are requests to sync pods soon from parts built before the
	// engine (a backend's pod data manager); the engine takes them at each
	// step. Default nil: none.
	Triggers *Triggers
	// Updates is the merged pod stream Run reads (podsource.Merger.Updates).
	// Default nil: only HandleUpdate feeds the engine.
	Updates <-chan podsource.Update
	// Sources names the pod sources feeding the engine (podsource's
	// PodSource.Name). Runtime pods that no source knows are killed only
	// once the engine has handled an update from each of them: a merger
	// sends every source's first set (an empty ADD when it has none), so a
	// restarted agent adopts what runs instead of killing it. The engine
	// counts what it has handled, not what a merger has read
	// (Merger.SeenAllSources turns true while that set may still be on its
	// way to the engine). Default nil: orphans are killed from the start.
	Sources []string
	// HostIPs are the node's addresses (status.hostIP(s), pod IPs on the host network).
	HostIPs []string
	// RuntimeName prefixes container IDs in statuses. Default: the Syncer's
	// RuntimeName() if it has one after a relist, else "containerd".
	RuntimeName string
	// Clock drives relists, resyncs and back-offs. Default clock.RealClock{}.
	Clock clock.WithTicker
	// Registerer receives the kubelet's pod metrics. Default nil: none.
	Registerer prometheus.Registerer
	// Recorder receives Killing events for orphaned pods. Default nil: none.
	Recorder record.EventRecorder
	// Admit decides whether a pod new to the engine may run (kubelet's
	// admission); new pods of one update are offered oldest first. A
	// rejected pod never runs: its status is phase Failed with the reason
	// (see admit.go). Default nil: every pod is admitted.
	Admit admission.Admitter
	// Rand returns numbers in [0,1) to jitter resyncs (×[1, 1.5)); it must be
	// safe for concurrent use. Default: math/rand/v2.Float64.
	Rand func() float64
	// RelistPeriod: the runtime is relisted this long after the last relist
	// (kubelet's generic PLEG). While container events stand in for the
	// relist, the backend's health is checked this often instead
	// (HealthChecker: the CRI syncer asks the runtime's Status) and this is
	// how long a new event stream must stay open, when no event comes,
	// before the relist slows down. Default 1s; between 10ms and 1m.
	RelistPeriod time.Duration
	// EventedRelistPeriod: the runtime is relisted this long after the last
	// relist while the Relister's event stream is up (kubelet's evented
	// PLEG relists every 300s). Default 5m; between 1s and 1h, and at least
	// RelistPeriod.
	EventedRelistPeriod time.Duration
	// ResyncPeriod: a pod with nothing to wait for is synced again this
	// often. Default 1m; between 1s and 1h.
	ResyncPeriod time.Duration
	// ErrorBackoff: a pod whose sync failed is synced again after this (or
	// sooner, when the sync asked). Default 10s; between 10ms and 1m.
	ErrorBackoff time.Duration
	// MaxParallel bounds the pods synced at once; pods being stopped
	// (Terminating) are not counted, and a pod's first sync takes the next
	// free slot before the syncs of pods synced before. Default 16;
	// between 1 and 10000.
	MaxParallel int
}

func (o *Options) defaults() error {
	if o.Syncer == nil {
		return optcheck.Required("podsync: Options.Syncer")
	}
	if o.Relister == nil {
		r, ok := o.Syncer.(Relister)
		if !ok {
			return errors.New("podsync: Options.Relister is required when the Syncer is not a Relister")
		}
		o.Relister = r
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	o.Rand = randutil.Or(o.Rand)
	for _, d := range []struct {
		what     string
		v        *time.Duration
		def      time.Duration
		min, max time.Duration
	}{
		{"RelistPeriod", &o.RelistPeriod, DefaultRelistPeriod, 10 * time.Millisecond, time.Minute},
		{"EventedRelistPeriod", &o.EventedRelistPeriod, DefaultEventedRelistPeriod, max(time.Second, o.RelistPeriod), time.Hour},
		{"ResyncPeriod", &o.ResyncPeriod, DefaultResyncPeriod, time.Second, time.Hour},
		{"ErrorBackoff", &o.ErrorBackoff, DefaultErrorBackoff, 10 * time.Millisecond, time.Minute},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if err := optcheck.Range("podsync: Options."+d.what, *d.v, d.min, d.max); err != nil {
			return err
		}
	}
	if o.MaxParallel == 0 {
		o.MaxParallel = DefaultMaxParallel
	}
	if err := optcheck.Range("podsync: Options.MaxParallel", o.MaxParallel, 1, 10000); err != nil {
		return err
	}
	return nil
}

// Lifecycle is where a pod worker is in the kubelet's lifecycle.
type Lifecycle int

// The lifecycle stages, in order.
const (
	Syncing Lifecycle = iota
	Terminating
	Terminated
	// Done: SyncTerminatedPod finished; later updates are ignored.
	Done
)

// String returns the stage's name.
func (l Lifecycle) String() string {
	return [...]string{"Syncing", "Terminating", "Terminated", "Done"}[l]
}

type worker struct {
	uid     types.UID
	pod     *corev1.Pod
	life    Lifecycle
	grace   time.Duration
	removed bool // gone from its source
	orphan  bool // no source ever had it
	// readd: the pod a source has again while the worker, removed or an
	// orphan, stops what runs of it; a new worker starts it when that is
	// over.
	readd     *corev1.Pod
	busy      bool // a sync is queued for a slot or running
	running   bool // a sync holds a slot
	pending   bool
	cancel    context.CancelFunc
	waiting   map[string]Waiting
	status    *corev1.PodStatus
	firstSeen time.Time
	started   bool
	synced    bool
	rejected  bool // refused by Options.Admit; never runs
	// staleSince, when not 0: the last sync changed what runs (it was
	// Engine.changes then) and no observation since shows it; the next
	// sync waits for one (the kubelet's pod worker waits for a status
	// newer than its last sync), or it would act on what was there
	// before (a second sandbox of the same attempt).
	staleSince uint64
	// evict is laid over every status generated from an eviction on
	// (Evict). Never changed in place: jobs share it.
	evict *corev1.PodStatus
	// preemptor: the pod this one was preempted for (admitLocked), made
	// due when this one is stopped.
	preemptor types.UID
	// waitFor: the pods preempted for this one, which it waits for (until
	// waitUntil) before its first sync.
	waitFor   []types.UID
	waitUntil time.Time
	// publishing orders a status published between syncs
	// (publishBetweenSyncs) before the next sync's own.
	publishing sync.Mutex
}

// Engine runs one pod worker per pod UID: the latest update wins, at most
// MaxParallel pods sync at once (pods being stopped are not counted), and
// each pod goes Syncing → Terminating → Terminated → Done through the
// PodSyncer. A relist of the backend observes what runs. SyncOnce is one synchronous step; Run loops it.
type Engine struct {
	o       Options
	metrics *metrics
	slots   *slots
	wake    chan struct{}

	mu            sync.Mutex
	workers       map[types.UID]*worker
	due           timerheap.Heap[types.UID]
	cache         map[types.UID]*PodState
	nextRelist    time.Time
	relistNow     bool
	relistErr     error           // the last relist's: syncs wait while the backend cannot be observed
	handled       map[string]bool // sources an update was handled from
	orphansSought bool            // a relist looked for orphans with the sources ready
	cleanups      []cleanup       // forgotten pods for the PodCleaner (Run's loop)

	// The Relister's events (Run only; events.go).
	ev           evState
	evSince      time.Time // when the open stream was opened
	evGot        bool      // the open stream delivered an event
	evented      bool      // the last relist chose EventedRelistPeriod
	evDownLogged bool      // the stream's failure was logged since the last change to evented
	evRetryAt    time.Time // when a failed stream is tried again
	evPods       map[types.UID]struct{}
	changes      uint64 // syncs that changed what runs, counted

	nextCheck time.Time // the next health check while evented
}

// observed is told that an observation began when Engine.changes was
// seen: a worker stale from a change until then is not any more.
func (w *worker) observed(seen uint64) {
	if w.staleSince <= seen {
		w.staleSince = 0
	}
}

// New returns an Engine with no pods.
func New(o Options) (*Engine, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("podsync: Options.Registerer: %w", err)
	}
	return &Engine{o: o, metrics: m, slots: newSlots(o.MaxParallel), wake: make(chan struct{}, 1),
		workers: map[types.UID]*worker{}, cache: map[types.UID]*PodState{}, handled: map[string]bool{}}, nil
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// scheduleLocked makes w due at t (or earlier, if it is due sooner).
func (e *Engine) scheduleLocked(uid types.UID, t time.Time) {
	if d, ok := e.due.Due(uid); ok && !t.Before(d) {
		return
	}
	e.due.Set(uid, t)
}

// Trigger makes the pod sync at the next step.
func (e *Engine) Trigger(uid types.UID) {
	e.mu.Lock()
	if _, ok := e.workers[uid]; ok {
		e.scheduleLocked(uid, e.o.Clock.Now())
	}
	e.mu.Unlock()
	e.poke()
}

// takeTriggers schedules the pods Options.Triggers asked for.
func (e *Engine) takeTriggers() {
	if e.o.Triggers == nil {
		return
	}
	for _, uid := range e.o.Triggers.take() {
		e.Trigger(uid)
	}
}

// HandleUpdate applies one update of the merged pod stream.
func (e *Engine) HandleUpdate(u podsource.Update) {
	now := e.o.Clock.Now()
	e.mu.Lock()
	e.handled[u.Source] = true
	for _, pod := range e.admissionOrder(u) {
		if pod != nil && !podsource.IsMirrorPod(pod) {
			e.applyLocked(u.Op, pod, now)
		}
	}
	e.mu.Unlock()
	e.poke()
}

// applyLocked applies op to one pod. The caller holds e.mu.
func (e *Engine) applyLocked(op podsource.Op, pod *corev1.Pod, now time.Time) {
	w := e.workers[pod.UID]
	known := w != nil
	if w == nil {
		if op == podsource.OpRemove {
			return
		}
		ok, r := e.admitLocked(pod, now)
		if !ok {
			return
		}
		w = &worker{uid: pod.UID, firstSeen: now}
		e.workers[pod.UID] = w
		if len(r.Preempt) > 0 {
			e.preemptLocked(w, r, now)
		}
		if e.o.Probes != nil {
			e.o.Probes.AddPod(pod)
		}
	}
	if w.life == Done {
		if op == podsource.OpRemove {
			e.forgetLocked(w)
		} else if w.rejected || w.evict != nil {
			e.rejectedUpdateLocked(w, pod)
		}
		return
	}
	if (w.orphan || w.removed) && !w.rejected {
		// What runs of it is being stopped for good (no source had it,
		// or its source removed it). A source that has it now gets it
		// started afresh once that is over (terminated), as the kubelet
		// restarts a pod its config has once its worker has stopped it.
		w.readd = nil
		if op != podsource.OpRemove {
			w.readd = pod
			return
		}
	}
	w.pod = pod
	if known && op == podsource.OpReconcile && len(pod.Spec.ReadinessGates) == 0 {
		// The pod's status alone changed in its source: as the
		// kubelet's pod manager, the engine keeps the new copy for
		// the pod's next sync without making it due (a pod with
		// readiness gates excepted: conditions others set decide
		// its readiness). A writer that keeps the API's status
		// (apiPodSeer) is handed the copy, to keep it instead of
		// its own.
		if sw, ok := e.o.Writer.(apiPodSeer); ok && !w.orphan {
			sw.SeeAPIPod(pod)
		}
		if w.status != nil {
			w.status = heldStatus(w.status, pod)
		}
		return
	}
	switch {
	case op == podsource.OpRemove:
		w.removed = true
		e.terminateLocked(w, PodGracePeriod(pod))
	case pod.DeletionTimestamp != nil:
		e.terminateLocked(w, PodGracePeriod(pod))
	}
	e.scheduleLocked(pod.UID, now)
	if w.busy {
		w.pending = true
	}
}

// terminateLocked moves w to Terminating with grace, which only shrinks,
// and cancels a SyncPod in flight.
func (e *Engine) terminateLocked(w *worker, grace time.Duration) {
	switch w.life {
	case Syncing:
		w.life, w.grace = Terminating, grace
		if w.cancel != nil {
			w.cancel()
		}
	case Terminating:
		if grace < w.grace {
			// A shorter grace restarts the termination with it.
			w.grace = grace
			if w.cancel != nil {
				w.cancel()
			}
		}
	}
}

func (e *Engine) forgetLocked(w *worker) {
	delete(e.workers, w.uid)
	e.due.Remove(w.uid)
	if _, ok := e.o.Syncer.(PodCleaner); ok && w.pod != nil {
		e.cleanups = append(e.cleanups, cleanup{pod: w.pod})
		e.poke()
	}
	if e.o.Writer != nil && !w.orphan {
		e.o.Writer.RemovePod(w.uid)
	}
}

// cleanup is a forgotten pod for the PodCleaner: retried ErrorBackoff
// after a failure (a log rotation may write into the pod's log directory
// while it is being removed), until it succeeds.
type cleanup struct {
	pod      *corev1.Pod
	after    time.Time // not before
	failures int
}

// cleanup hands the forgotten pods that are due to the PodCleaner and
// keeps those that failed for another try.
func (e *Engine) cleanup(ctx context.Context) {
	now := e.o.Clock.Now()
	e.mu.Lock()
	var due, later []cleanup
	for _, c := range e.cleanups {
		switch {
		case e.workers[c.pod.UID] != nil:
			// A source has the pod again (the same UID: a static pod
			// re-added): what it left is the new pod's. A worker made
			// after this look syncs from a later step, after these
			// cleanups have run.
		case now.Before(c.after):
			later = append(later, c)
		default:
			due = append(due, c)
		}
	}
	e.cleanups = later
	e.mu.Unlock()
	if len(due) == 0 {
		return
	}
	pc := e.o.Syncer.(PodCleaner)
	var failed []cleanup
	for _, c := range due {
		err := pc.CleanupPod(ctx, c.pod)
		if err == nil || ctx.Err() != nil {
			continue
		}
		c.failures++
		c.after = e.o.Clock.Now().Add(e.o.ErrorBackoff)
		failed = append(failed, c)
		logger := klog.FromContext(ctx)
		if c.failures == 1 {
			logger.Error(err, "Error removing what is left of a deleted pod; retrying", "pod", klog.KObj(c.pod), "podUID", c.pod.UID, "after", e.o.ErrorBackoff)
		} else {
			logger.V(2).Info("Removing what is left of a deleted pod failed again", "pod", klog.KObj(c.pod), "podUID", c.pod.UID, "failures", c.failures, "err", err)
		}
	}
	e.mu.Lock()
	e.cleanups = append(e.cleanups, failed...)
	e.mu.Unlock()
}

// PodStatus returns the status last computed for the pod.
func (e *Engine) PodStatus(uid types.UID) (corev1.PodStatus, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workers[uid]; w != nil && w.status != nil {
		return *w.status, true
	}
	return corev1.PodStatus{}, false
}

// PodLifecycle returns where the pod's worker is, and false if there is none.
func (e *Engine) PodLifecycle(uid types.UID) (Lifecycle, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workers[uid]; w != nil {
		return w.life, true
	}
	return 0, false
}

// State returns what the last relist saw of the pod.
func (e *Engine) State(uid types.UID) *PodState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cache[uid]
}

// SyncOnce is one step, the one Run loops: it takes the pods triggered
// since the last step; relists the backend when a relist is due (or asked
// for, or events named pods and the Relister cannot relist one pod), else
// relists the pods that container events named and, while events stand in
// for relists, checks the backend's health when that is due; then syncs
// every pod that is due, waits for those syncs (Run does not), and hands
// the forgotten pods that are due to the PodCleaner. It returns how long to
// wait before the next step, and the relist's error.
func (e *Engine) SyncOnce(ctx context.Context) (time.Duration, error) {
	var wg sync.WaitGroup
	return e.step(ctx, &wg, true)
}

// RelistNow makes the next step relist the backend in full, whatever the
// relist period: for a caller that changed the backend behind the engine's
// back (a simulated backend's pod exiting in a test) and steps the engine
// without moving its clock.
func (e *Engine) RelistNow() {
	e.mu.Lock()
	e.relistNow = true
	e.mu.Unlock()
	e.poke()
}

// step is SyncOnce; syncs are added to wg, and waited for when wait is set.
func (e *Engine) step(ctx context.Context, wg *sync.WaitGroup, wait bool) (time.Duration, error) {
	e.takeTriggers()
	err := e.observeStep(ctx)
	for _, w := range e.dispatch(ctx, wg) {
		e.publishBetweenSyncs(w)
	}
	if wait {
		wg.Wait()
	}
	e.cleanup(ctx)
	return max(0, e.next().Sub(e.o.Clock.Now())), err
}

// maxPodRelists is how many pods a step observes one at a time (named by
// events or changed by their syncs); more, and it relists the backend in
// full: one relist lists everything in a few calls whatever the count,
// where each pod alone takes two, and the pods started at once on a busy
// runtime would otherwise hold the step (and every new pod's sync behind
// it) for two calls each.
const maxPodRelists = 4

// observeStep relists the backend when that is due (or when more than
// maxPodRelists pods wait to be observed), else relists the pods that
// events named or syncs changed and checks the backend's health when that
// is due.
func (e *Engine) observeStep(ctx context.Context) error {
	pr, _ := e.o.Relister.(PodRelister)
	now := e.o.Clock.Now()
	e.mu.Lock()
	relist := e.relistNow || !now.Before(e.nextRelist) || len(e.evPods) > 0 && (pr == nil || len(e.evPods) > maxPodRelists)
	var pods []types.UID
	check := false
	if !relist {
		for uid := range e.evPods {
			pods = append(pods, uid)
		}
		e.evPods = nil
		check = e.evented && !now.Before(e.nextCheck)
	}
	e.mu.Unlock()
	if relist {
		return e.relist(ctx)
	}
	if len(pods) > 0 {
		e.relistPods(ctx, pr, pods)
	}
	if check {
		e.check(ctx)
	}
	return nil
}

func (e *Engine) next() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	next := e.nextRelist
	if e.relistNow || len(e.evPods) > 0 {
		next = e.o.Clock.Now()
	}
	if e.evented && e.nextCheck.Before(next) {
		next = e.nextCheck
	}
	if _, t, ok := e.due.Peek(); ok && t.Before(next) && e.relistErr == nil {
		next = t
	}
	for _, c := range e.cleanups {
		if c.after.Before(next) {
			next = c.after
		}
	}
	return next
}

// Run steps until ctx ends, reading Options.Updates and probe result
// changes between steps and watching the Relister's events, then waits for
// the syncs in flight and returns nil. Its steps are SyncOnce's, except that
// a step does not wait for the syncs it starts; relist errors are logged.
func (e *Engine) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	logger := klog.FromContext(ctx)
	wakes := []loop.Wake{loop.Signal(e.wake)}
	if e.o.Updates != nil {
		wakes = append(wakes, loop.On(e.o.Updates, e.HandleUpdate))
	}
	if e.o.Probes != nil {
		wakes = append(wakes, loop.On(e.o.Probes.Subscribe(ctx, 256), func(u probe.Update) { e.Trigger(u.PodUID) }))
	}
	if e.o.Triggers != nil {
		wakes = append(wakes, loop.Signal(e.o.Triggers.wake))
	}
	if w, ok := e.o.Relister.(EventWatcher); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.watchEvents(ctx, w)
		}()
	}
	return loop.Run(ctx, e.o.Clock, func(ctx context.Context) (time.Duration, error) {
		d, err := e.step(ctx, &wg, false)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Relist failed")
		}
		return d, nil
	}, wakes...)
}

// relist observes the backend, wakes pods whose state changed, publishes
// the new status of those that are not syncing (so a started container is
// reported without waiting for a free sync slot) and starts terminating
// orphans.
func (e *Engine) relist(ctx context.Context) error {
	e.mu.Lock()
	// Events from now on may be newer than what the relist sees; those
	// before are covered by it.
	e.evPods = nil
	was := e.evented
	seen := e.changes // the changes this relist is sure to see
	e.mu.Unlock()
	pods, err := e.o.Relister.Relist(ctx)
	changed, err := e.observe(pods, err, seen)
	e.mu.Lock()
	is := e.evented
	if is {
		e.evDownLogged = false
	}
	e.mu.Unlock()
	if is && !was {
		klog.FromContext(ctx).Info("Container events in use; relisting less often", "period", e.o.EventedRelistPeriod)
	}
	// Dispatch runs on this goroutine after relist, so none of these
	// workers starts a sync before its status is published.
	for _, w := range changed {
		e.publishBetweenSyncs(w)
	}
	return err
}

// observe takes a relist's answer in; seen is Engine.changes when it
// began: workers stale from a change until then are not any more.
func (e *Engine) observe(pods map[types.UID]*PodState, err error, seen uint64) ([]*worker, error) {
	now := e.o.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evented = err == nil && e.eventedLocked(now)
	period := e.o.RelistPeriod
	if e.evented {
		period = e.o.EventedRelistPeriod
	}
	e.nextRelist, e.nextCheck, e.relistNow, e.relistErr = now.Add(period), now.Add(e.o.RelistPeriod), false, err
	if err != nil {
		return nil, err
	}
	for _, w := range e.workers {
		w.observed(seen)
	}
	var changed []*worker
	for uid, st := range pods {
		if !stateEqual(e.cache[uid], st) {
			if w := e.wakeLocked(uid, now); w != nil {
				changed = append(changed, w)
			}
		}
	}
	for uid := range e.cache {
		if _, ok := pods[uid]; !ok {
			if _, ok := e.workers[uid]; ok {
				e.scheduleLocked(uid, now)
			}
		}
	}
	e.cache = pods
	if e.sourcesReadyLocked() {
		e.orphansSought = true
		for uid, st := range pods {
			if _, ok := e.workers[uid]; !ok {
				e.orphanLocked(uid, st, now)
			}
		}
	}
	e.updateGauges(pods)
	return changed, nil
}

// wakeLocked makes the worker of a pod whose observed state changed due,
// and returns it when its status is to be published now (betweenSyncs).
func (e *Engine) wakeLocked(uid types.UID, now time.Time) *worker {
	w, ok := e.workers[uid]
	if !ok {
		return nil
	}
	e.scheduleLocked(uid, now)
	if w.betweenSyncs() {
		return w
	}
	return nil
}

// betweenSyncs: w's pod is synced, and no sync of it runs now (none, or
// one waiting for a slot); its status is published between syncs from
// the newest observation (publishBetweenSyncs). The caller holds e.mu.
func (w *worker) betweenSyncs() bool {
	return w.life == Syncing && !w.running && !w.orphan && w.status != nil
}

// orphanLocked starts terminating a pod that runs but no source knows.
func (e *Engine) orphanLocked(uid types.UID, st *PodState, now time.Time) {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = st.Name, st.Namespace, uid
	w := &worker{uid: uid, pod: pod, life: Terminating, grace: OrphanGracePeriod, orphan: true, firstSeen: now}
	e.workers[uid] = w
	e.scheduleLocked(uid, now)
	if e.o.Recorder != nil {
		e.o.Recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping orphaned pod %s/%s", st.Namespace, st.Name)
	}
}

// sourcesReadyLocked: an update of every source in Options.Sources was
// handled.
func (e *Engine) sourcesReadyLocked() bool {
	for _, s := range e.o.Sources {
		if !e.handled[s] {
			return false
		}
	}
	return true
}

func (e *Engine) updateGauges(pods map[types.UID]*PodState) {
	running := 0
	states := map[runtimeapi.ContainerState]int{}
	for _, p := range pods {
		if sb := p.NewestSandbox(); sb != nil && sb.Ready() {
			running++
		}
		for _, c := range p.Containers {
			states[c.State]++
		}
	}
	e.metrics.runningPods.Set(float64(running))
	for s, name := range map[runtimeapi.ContainerState]string{
		runtimeapi.ContainerState_CONTAINER_CREATED: "created", runtimeapi.ContainerState_CONTAINER_RUNNING: "running",
		runtimeapi.ContainerState_CONTAINER_EXITED: "exited", runtimeapi.ContainerState_CONTAINER_UNKNOWN: "unknown",
	} {
		e.metrics.runningContainers.WithLabelValues(name).Set(float64(states[s]))
	}
}

func stateEqual(a, b *PodState) bool {
	if a == b || a == nil || b == nil {
		return a == b
	}
	if len(a.Sandboxes) != len(b.Sandboxes) || len(a.Containers) != len(b.Containers) {
		return false
	}
	for i, s := range a.Sandboxes {
		if o := b.Sandboxes[i]; s.ID != o.ID || s.State != o.State {
			return false
		}
	}
	for i, c := range a.Containers {
		if o := b.Containers[i]; c.ID != o.ID || c.State != o.State {
			return false
		}
	}
	return true
}

// dispatch starts a sync for every due pod that is not syncing already.
//
// It returns the workers of pods due while their sync waits for a slot,
// whose status the caller publishes (publishBetweenSyncs): what changed
// meanwhile (a readiness probe's result) is written at once, not after
// the syncs that hold the slots, which on a node starting many pods can
// take a minute; the kubelet's prober hands readiness to its status
// manager without a pod sync.
func (e *Engine) dispatch(ctx context.Context, wg *sync.WaitGroup) (waiting []*worker) {
	now := e.o.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.relistErr != nil {
		// As the kubelet pauses while the runtime is unhealthy: no sync acts
		// on a state that could not be observed.
		return nil
	}
	free := e.slots.available() // slots a sync started now finds free
	var stale []types.UID
	defer func() {
		// Due again once the relist its last sync asked for has run.
		for _, uid := range stale {
			e.scheduleLocked(uid, now)
		}
	}()
	for {
		uid, ok := e.due.PopDue(now)
		if !ok {
			return waiting
		}
		w := e.workers[uid]
		if w == nil || w.life == Done {
			continue
		}
		if w.busy {
			w.pending = true
			if w.betweenSyncs() {
				waiting = append(waiting, w)
			}
			continue
		}
		if w.staleSince != 0 && w.life == Syncing {
			stale = append(stale, uid)
			continue
		}
		if w.life == Syncing && e.preemptionWaitLocked(w, now) {
			continue
		}
		if w.life != Terminating {
			if free > 0 {
				free--
			} else if w.betweenSyncs() {
				waiting = append(waiting, w) // this sync will wait for a slot
			}
		}
		w.busy = true
		wctx, cancel := context.WithCancel(ctx)
		w.cancel = cancel
		job := job{w: w, pod: w.pod, life: w.life, grace: w.grace, state: e.cache[uid], waiting: w.waiting, status: w.status, evict: w.evict}
		first := w.life == Syncing && !w.synced
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			// A pod being stopped takes no slot: stopping frees what
			// starting takes, and the kubelet bounds neither.
			if job.life != Terminating {
				if err := e.slots.acquire(wctx, first); err != nil {
					e.finish(job, 0, err)
					return
				}
				defer e.slots.release()
			}
			// Sync on the newest observation: the relist may have
			// published a newer status while this sync waited for a slot.
			e.mu.Lock()
			w.running = true
			job.pod, job.state, job.waiting, job.status, job.evict = w.pod, e.cache[uid], w.waiting, w.status, w.evict
			e.mu.Unlock()
			e.run(wctx, job)
		}()
	}
}

// job is a snapshot of a worker for one sync.
type job struct {
	w       *worker
	pod     *corev1.Pod
	life    Lifecycle
	grace   time.Duration
	state   *PodState
	waiting map[string]Waiting
	status  *corev1.PodStatus
	evict   *corev1.PodStatus
}

func (e *Engine) runtimeName() string {
	if e.o.RuntimeName != "" {
		return e.o.RuntimeName
	}
	if n, ok := e.o.Syncer.(interface{ RuntimeName() string }); ok && n.RuntimeName() != "" {
		return n.RuntimeName()
	}
	return "containerd"
}

// status computes the pod's status from the job's snapshot.
func (e *Engine) status(j job, terminated bool) corev1.PodStatus {
	pod := j.pod
	if j.status != nil {
		p := *pod
		p.Status = *j.status
		// Clipped: an append below makes an array of its own, never
		// writing into the published status's (two jobs may share it).
		p.Status.Conditions = slices.Clip(p.Status.Conditions)
		// Conditions others own come from the API.
		for _, c := range pod.Status.Conditions {
			found := false
			for _, o := range p.Status.Conditions {
				found = found || o.Type == c.Type
			}
			if !found {
				p.Status.Conditions = append(p.Status.Conditions, c)
			}
		}
		if isTerminal(pod.Status.Phase) {
			p.Status.Phase = pod.Status.Phase
		}
		pod = &p
	}
	ev := j.evict
	if ev != nil && !terminated {
		// While containers may still run, the eviction shows in its
		// conditions alone: the terminal phase waits for the end of the
		// termination, as the kubelet's status manager holds it back.
		ev = &corev1.PodStatus{Conditions: ev.Conditions}
	}
	if ev != nil {
		// Generated on top of the eviction's phase (so Ready turns False
		// with reason PodFailed), reason and message.
		p := *pod
		overlayEviction(&p.Status, ev)
		pod = &p
	}
	var pr ProbeResults
	if e.o.Probes != nil {
		pr = e.o.Probes
	}
	s := GeneratePodStatus(StatusInput{Pod: pod, State: j.state, Waiting: j.waiting, Probes: pr, RuntimeName: e.runtimeName(),
		HostIPs: e.o.HostIPs, Now: e.o.Clock.Now(), Terminated: terminated})
	if ev != nil {
		overlayEviction(&s, ev)
	}
	return s
}

// publishBetweenSyncs publishes the status of w's pod from the newest
// observation while no sync of it runs (a relist saw it change, or its
// sync waits for a slot); once a sync runs, the sync publishes instead.
func (e *Engine) publishBetweenSyncs(w *worker) {
	w.publishing.Lock()
	defer w.publishing.Unlock()
	e.mu.Lock()
	if !w.betweenSyncs() || e.workers[w.uid] != w {
		e.mu.Unlock()
		return
	}
	j := job{w: w, pod: w.pod, life: w.life, state: e.cache[w.uid], waiting: w.waiting, status: w.status, evict: w.evict}
	e.mu.Unlock()
	e.publishHeld(j, e.status(j, false))
}

func (e *Engine) publish(j job, s corev1.PodStatus) {
	j.w.publishing.Lock()
	defer j.w.publishing.Unlock()
	e.publishHeld(j, s)
}

// heldStatus is the status the engine holds for a pod whose status it
// computed as s: the API copy's, when pod (the API's copy) shows s, so
// that a pod's status is held once; else s. Neither is changed in place.
func heldStatus(s *corev1.PodStatus, pod *corev1.Pod) *corev1.PodStatus {
	if podequal.Status(s, &pod.Status) {
		return &pod.Status
	}
	return s
}

// publishHeld is publish with j.w.publishing held.
func (e *Engine) publishHeld(j job, s corev1.PodStatus) {
	e.mu.Lock()
	changed := j.w.status == nil || !podequal.Status(j.w.status, &s)
	if changed {
		j.w.status = heldStatus(&s, j.pod)
	}
	if !j.w.started && s.Phase == corev1.PodRunning {
		j.w.started = true
		e.metrics.podStart.Observe(e.o.Clock.Since(j.w.firstSeen).Seconds())
	}
	e.mu.Unlock()
	if j.w.orphan {
		return
	}
	if e.o.Probes != nil {
		e.o.Probes.SetPodStatus(j.pod.UID, &s)
	}
	if changed && e.o.Writer != nil {
		e.o.Writer.SetPodStatus(j.pod, s)
	}
}

// run carries out one sync of a worker per its lifecycle stage.
func (e *Engine) run(ctx context.Context, j job) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(j.pod), "podUID", j.pod.UID)
	ctx = klog.NewContext(ctx, logger)
	start := e.o.Clock.Now()
	switch j.life {
	case Syncing:
		s := e.status(j, false)
		e.publish(j, s)
		if isTerminal(s.Phase) {
			e.mu.Lock()
			e.terminateLocked(j.w, PodGracePeriod(j.pod))
			e.mu.Unlock()
			e.finish(j, 0, nil)
			return
		}
		left, hasDeadline := deadlineLeft(j.pod, s, start)
		if hasDeadline && left <= 0 {
			e.mu.Lock()
			e.deadlineExceededLocked(j.w, start)
			e.mu.Unlock()
			e.finish(j, 0, nil)
			return
		}
		res, err := e.o.Syncer.SyncPod(ctx, j.pod, j.state)
		op := "sync"
		if !j.w.synced {
			op = "create"
		}
		e.metrics.workerDuration.WithLabelValues(op).Observe(e.o.Clock.Since(start).Seconds())
		e.mu.Lock()
		j.w.waiting, j.w.synced = res.Waiting, true
		if res.Changed {
			e.changes++
			j.w.staleSince = e.changes
			if _, ok := e.o.Relister.(PodRelister); ok {
				// Look at this pod alone, at once, as the kubelet's
				// evented relist does; other pods' changes are seen by
				// their events or the next relist, as before.
				if e.evPods == nil {
					e.evPods = map[types.UID]struct{}{}
				}
				e.evPods[j.pod.UID] = struct{}{}
			} else {
				e.relistNow = true
			}
		}
		e.mu.Unlock()
		if !maps.Equal(res.Waiting, j.waiting) && ctx.Err() == nil {
			// Show the new waiting reasons (CrashLoopBackOff, ErrImagePull) now.
			j.waiting = res.Waiting
			e.publish(j, e.status(j, false))
		}
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Error syncing pod, skipping")
		}
		after := res.RequeueAfter
		if err != nil {
			if after == 0 || after > e.o.ErrorBackoff {
				after = e.o.ErrorBackoff
			}
		} else if after == 0 {
			after = time.Duration(float64(e.o.ResyncPeriod) * (1 + 0.5*e.o.Rand()))
		}
		if hasDeadline {
			// Synced again when the deadline passes, to stop it then.
			after = min(after, max(left-e.o.Clock.Since(start), time.Nanosecond))
		}
		e.finish(j, after, nil)
	case Terminating:
		if j.evict != nil && !j.w.orphan {
			// The DisruptionTarget condition is written before the
			// containers are stopped, as the kubelet writes it.
			e.publish(j, e.status(j, false))
		}
		err := e.o.Syncer.SyncTerminatingPod(ctx, j.pod, j.state, j.grace)
		if err != nil {
			if ctx.Err() == nil {
				logger.Error(err, "Error terminating pod")
			}
			e.finish(j, time.Second, err)
			return
		}
		if pr, ok := e.o.Relister.(PodRelister); ok {
			// As the kubelet, look at this pod alone to confirm it stopped
			// and clean it up in the same sync.
			if st, err := pr.RelistPod(ctx, j.pod.UID); err == nil {
				e.mu.Lock()
				j.w.life = Terminated
				e.victimStoppedLocked(j.w, e.o.Clock.Now())
				if st == nil {
					delete(e.cache, j.pod.UID)
				} else {
					e.cache[j.pod.UID] = st
				}
				j.evict = j.w.evict
				e.mu.Unlock()
				j.life, j.state = Terminated, st
				if !j.w.orphan {
					// What stopped shows at once, as the kubelet writes
					// the status of a pod whose containers it stopped
					// before cleaning it up (which may take a while).
					s := e.status(j, true)
					e.publish(j, s)
					j.status = &s
				}
				e.terminated(ctx, j)
				return
			}
		}
		e.mu.Lock()
		j.w.life = Terminated
		e.victimStoppedLocked(j.w, e.o.Clock.Now())
		e.relistNow = true
		e.mu.Unlock()
		e.finish(j, 0, nil)
	case Terminated:
		e.terminated(ctx, j)
	}
}

// terminated runs SyncTerminatedPod and retires the worker.
func (e *Engine) terminated(ctx context.Context, j job) {
	if err := e.o.Syncer.SyncTerminatedPod(ctx, j.pod, j.state); err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Error cleaning up terminated pod")
		}
		e.finish(j, e.o.ErrorBackoff, err)
		return
	}
	if !j.w.orphan {
		e.mu.Lock()
		j.evict = j.w.evict // an Evict during this sync counts too
		e.mu.Unlock()
		e.publish(j, e.status(j, true))
		if e.o.Writer != nil {
			e.o.Writer.PodTerminated(j.pod)
		}
	}
	if e.o.Probes != nil && !j.w.orphan {
		e.o.Probes.RemovePod(j.pod.UID)
	}
	e.mu.Lock()
	j.w.life = Done
	j.w.busy, j.w.running = false, false
	if j.w.removed || j.w.orphan {
		e.forgetLocked(j.w)
		if j.w.readd != nil {
			e.applyLocked(podsource.OpAdd, j.w.readd, e.o.Clock.Now())
		}
	}
	e.mu.Unlock()
	e.poke()
}

// finish ends a sync: the worker is free again and due after after (at once
// if an update came in meanwhile, or it changed stage).
func (e *Engine) finish(j job, after time.Duration, _ error) {
	now := e.o.Clock.Now()
	e.mu.Lock()
	w := j.w
	w.busy, w.running = false, false
	w.cancel = nil
	if w.pending || w.life != j.life {
		after = 0
	}
	w.pending = false
	if e.workers[w.uid] == w && w.life != Done {
		e.scheduleLocked(w.uid, now.Add(after))
	}
	e.mu.Unlock()
	e.poke()
}
