package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/randutil"
	"github.com/nodekit/nodekit/internal/timerheap"

	"github.com/nodekit/nodekit/internal/loop"
)

// Options configures a Manager.
type Options struct {
	// Prober runs the probes. Default: NewHandlers(HandlerOptions{}), which
	// runs HTTP, TCP and gRPC probes and reports exec probes as errors (no
	// Execer).
	Prober Prober
	// Clock drives every period, delay and hold. Default clock.RealClock{}.
	Clock clock.Clock
	// Recorder receives Warning events: Unhealthy for failed and errored
	// probes, ProbeWarning for successes with a warning. Default nil: none.
	Recorder record.EventRecorder
	// Registerer receives the probe metrics (prober_probe_total,
	// prober_probe_duration_seconds, kubelet's names and labels). Managers
	// that share a Registerer share the metrics: registering is idempotent.
	// Default nil: no metrics.
	Registerer prometheus.Registerer
	// Rand returns numbers in [0,1) for the random wait before a worker's
	// first probe (NoStartJitter). Default math/rand/v2's Float64.
	Rand func() float64
	// MaxConcurrentProbes bounds how many probes run at once. Default 256;
	// between 1 and 100000. Probes due while all slots are busy wait in a
	// queue in the order they fell due.
	MaxConcurrentProbes int
	// Batch lets probes that fall due close together run together: when the
	// manager wakes for a probe, it also starts those due within Batch after
	// it, so a node with probes spread over the period wakes ten times a
	// second instead of for every probe. A probe runs at most Batch early,
	// never late, and its period is kept (the next run is due one period
	// after this one was due). Default 100ms; between 1ms and 1s.
	Batch time.Duration
	// NoStartJitter turns off the random wait before a worker's first probe.
	// Default false: a liveness or startup worker first waits a random part
	// of its period, so the pods of a node filled at once do not probe at
	// once every period (their containers are not running when the workers
	// are created, so the first round has nothing to probe anyway); a
	// readiness worker does only when created within one period of the
	// manager's creation (that is, after the agent restarted), as the
	// kubelet's workers do, since a readiness probe runs as soon as its
	// container runs.
	NoStartJitter bool
}

// Update is one change of a published probe result.
type Update struct {
	PodUID        types.UID
	ContainerName string
	// ContainerID is the container the result is for, as in ContainerStatus.
	ContainerID string
	Type        Type
	Result      Result
	// Message is the output of the probe that set the result ("" for initial
	// results and results set without a probe).
	Message string
}

// ErrAlreadyRunning is returned by Run when another Run of the same Manager
// has not returned yet.
var ErrAlreadyRunning = errors.New("probe manager is already running")

// restartGrace: a container that was running this long before the manager
// was created is taken to have been running before the agent restarted.
const restartGrace = 10 * time.Second

// maxConcurrentProbes bounds Options.MaxConcurrentProbes.
const maxConcurrentProbes = 100000

// readinessRetry is the shortest wait before a readiness probe that failed
// in its container's first period, before it was ever ready, runs again.
const readinessRetry = 250 * time.Millisecond

// maxErrorRetries is how many times a probe that could not run (Outcome.Err)
// is tried in one round before the round is given up, as kubelet does.
const maxErrorRetries = 3

// Manager runs the liveness, readiness and startup probes of the pods it is
// given and publishes their results. See the package documentation for the
// timing rules. It is safe for concurrent use.
type Manager struct {
	prober    Prober
	clock     clock.Clock
	recorder  record.EventRecorder
	metrics   *metrics
	maxActive int
	batch     time.Duration
	jitter    bool
	rand      func() float64
	start     time.Time

	mu         sync.Mutex
	pods       map[types.UID]*podEntry
	workers    map[workerKey]*worker
	due        timerheap.Heap[*worker] // workers waiting for their next round
	queue      []task
	queueHead  int
	active     int
	idle       *sync.Cond
	subs       []*subscriber
	running    bool
	sleepUntil time.Time // when Run's timer fires; zero when Run is not waiting
	wake       chan struct{}
}

type workerKey struct {
	uid  types.UID
	name string
	typ  Type
}

type podEntry struct {
	// probeless: AddPod found no probe in the pod; nothing of it is kept
	// but this mark (its status is read by probes alone).
	probeless bool
	pod       *corev1.Pod
	hasStatus bool
	ip        string
	phase     corev1.PodPhase
	cs        map[string]containerState
	// prev is the map cs was before the last status, kept to be reused.
	prev    map[string]containerState
	workers []*worker
}

type containerState struct {
	id        string
	running   bool
	startedAt time.Time
	// seenAt is when a status first showed the container running (the
	// manager's clock), carried from status to status while its ID stays.
	seenAt     time.Time
	started    bool // ContainerStatus.Started was true
	terminated bool
	exitCode   int32
}

type task struct {
	w   *worker
	ctx context.Context
	wg  *sync.WaitGroup
}

// New returns a Manager with no pods. It starts nothing: call Run, or
// SyncOnce from a loop of your own.
func New(o Options) (*Manager, error) {
	if o.Prober == nil {
		p, err := NewHandlers(HandlerOptions{})
		if err != nil {
			return nil, err
		}
		o.Prober = p
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxConcurrentProbes == 0 {
		o.MaxConcurrentProbes = 256
	}
	if o.Batch == 0 {
		o.Batch = 100 * time.Millisecond
	}
	o.Rand = randutil.Or(o.Rand)
	if err := optcheck.Range("probe: Options.Batch", o.Batch, time.Millisecond, time.Second); err != nil {
		return nil, err
	}
	if err := optcheck.Range("probe: Options.MaxConcurrentProbes", o.MaxConcurrentProbes, 1, maxConcurrentProbes); err != nil {
		return nil, err
	}
	m := &Manager{
		prober:    o.Prober,
		clock:     o.Clock,
		recorder:  o.Recorder,
		maxActive: o.MaxConcurrentProbes,
		batch:     o.Batch,
		jitter:    !o.NoStartJitter,
		rand:      o.Rand,
		start:     o.Clock.Now(),
		pods:      make(map[types.UID]*podEntry),
		workers:   make(map[workerKey]*worker),
		wake:      make(chan struct{}, 1),
	}
	m.idle = sync.NewCond(&m.mu)
	mt, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("probe: Options.Registerer: %w", err)
	}
	m.metrics = mt
	return m, nil
}

// AddPod records pod and starts a worker for every probe of its containers
// (and of its restartable init containers) that has none yet. Calling it
// again for the same UID records the newer pod object (for its deletion
// timestamp) and adds workers for probes that are new; probe specs of
// existing workers are not changed, as in kubelet. If pod.Status names a pod
// IP or container statuses and no status was set yet, it is used as the
// pod's status (see SetPodStatus).
func (m *Manager) AddPod(pod *corev1.Pod) {
	if pod == nil {
		return
	}
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	pe := m.pods[pod.UID]
	if pe == nil {
		pe = &podEntry{}
		m.pods[pod.UID] = pe
	}
	pe.pod = pod
	if !pe.hasStatus && (pod.Status.PodIP != "" || len(pod.Status.ContainerStatuses) > 0 || len(pod.Status.InitContainerStatuses) > 0) {
		pe.setStatus(&pod.Status, m.clock.Now())
	}
	add := func(c *corev1.Container, init bool) {
		for _, t := range [...]Type{Startup, Readiness, Liveness} {
			spec := specFor(c, t)
			if spec == nil {
				continue
			}
			k := workerKey{pod.UID, c.Name, t}
			if _, ok := m.workers[k]; ok {
				continue
			}
			w := newWorker(m, k, pod, c, spec, init)
			w.next = now
			if m.jitter && (w.period > now.Sub(m.start) || t != Readiness) {
				w.next = now.Add(time.Duration(m.rand() * float64(w.period)))
			}
			m.workers[k] = w
			pe.workers = append(pe.workers, w)
			m.due.Set(w, w.next)
			m.wakeLocked(w.next)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], false)
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if isRestartableInit(c) {
			add(c, true)
		}
	}
	if len(pe.workers) == 0 {
		// Only probes read the pod and its status: of one without any,
		// nothing is kept (nor what it shares with its source).
		*pe = podEntry{probeless: true}
	}
}

// SetPodStatus tells the manager the pod's IP, phase and container IDs,
// states and start times. The workers read it at their next probe: a new
// container ID resets a worker to its initial result and ends a hold. It
// may be called before AddPod; RemovePod forgets it.
func (m *Manager) SetPodStatus(uid types.UID, status *corev1.PodStatus) {
	if status == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pe := m.pods[uid]
	if pe == nil {
		pe = &podEntry{}
		m.pods[uid] = pe
	}
	if pe.probeless {
		return
	}
	now := m.clock.Now()
	pe.setStatus(status, now)
	// As kubelet: a running container whose readiness probe has no result
	// yet is probed at once, not at the worker's next period.
	for _, w := range pe.workers {
		if w.key.typ != Readiness {
			continue
		}
		if c, ok := pe.cs[w.key.name]; ok && c.running && c.id != "" && !(w.hasPub && w.pubID == c.id) {
			m.triggerLocked(w, now)
		}
	}
}

func (pe *podEntry) setStatus(s *corev1.PodStatus, now time.Time) {
	pe.hasStatus = true
	pe.ip = s.PodIP
	pe.phase = s.Phase
	prev, cs := pe.cs, pe.prev
	if cs == nil {
		cs = make(map[string]containerState, len(s.ContainerStatuses)+len(s.InitContainerStatuses))
	} else {
		clear(cs)
	}
	put := func(list []corev1.ContainerStatus, init bool) {
		for i := range list {
			c := &list[i]
			// kubelet's lookup: a regular container's status, unless it has
			// no ID, then an init container's of the same name.
			if old, ok := cs[c.Name]; ok && init && old.id != "" {
				continue
			}
			st := containerState{id: c.ContainerID, started: c.Started != nil && *c.Started}
			if r := c.State.Running; r != nil {
				st.running = true
				st.startedAt = r.StartedAt.Time
				if c.ContainerID != "" {
					st.seenAt = now
					if p, ok := prev[c.Name]; ok && p.id == c.ContainerID && !p.seenAt.IsZero() {
						st.seenAt = p.seenAt
					}
				}
			}
			if t := c.State.Terminated; t != nil {
				st.terminated = true
				st.exitCode = t.ExitCode
			}
			cs[c.Name] = st
		}
	}
	put(s.ContainerStatuses, false)
	put(s.InitContainerStatuses, true)
	pe.cs, pe.prev = cs, prev
}

// age is how long the container has run, at the least: a status's start
// time may be whole seconds (as the API keeps it), so the start is taken
// as no later than a second after it and no later than when a status
// first showed the container running.
func (c *containerState) age(now time.Time) time.Duration {
	start := c.startedAt
	if !c.seenAt.IsZero() {
		start = c.startedAt.Add(time.Second)
		if c.seenAt.Before(start) {
			start = c.seenAt
		}
	}
	return now.Sub(start)
}

// RemovePod stops every worker of the pod, cancels its probes in flight and
// forgets its results and status.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pe := m.pods[uid]
	if pe == nil {
		return
	}
	for _, w := range slices.Clone(pe.workers) {
		m.removeWorkerLocked(w)
	}
	delete(m.pods, uid)
}

// CleanupPods removes every pod whose UID is not in desired, as RemovePod
// does; for housekeeping that compares with the pods an agent should run.
func (m *Manager) CleanupPods(desired map[types.UID]struct{}) {
	m.mu.Lock()
	var gone []types.UID
	for uid := range m.pods {
		if _, ok := desired[uid]; !ok {
			gone = append(gone, uid)
		}
	}
	m.mu.Unlock()
	for _, uid := range gone {
		m.RemovePod(uid)
	}
}

// StopLivenessAndStartup stops the pod's liveness and startup workers (a pod
// that is terminating keeps only its readiness probes, as in kubelet).
func (m *Manager) StopLivenessAndStartup(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pe := m.pods[uid]
	if pe == nil {
		return
	}
	for _, w := range slices.Clone(pe.workers) {
		if w.key.typ == Liveness || w.key.typ == Startup {
			m.removeWorkerLocked(w)
		}
	}
}

// removeWorkerLocked stops w: it leaves the schedule, its probe in flight is
// cancelled, its result and metrics are dropped.
func (m *Manager) removeWorkerLocked(w *worker) {
	if w.removed {
		return
	}
	w.removed = true
	w.hasPub = false
	delete(m.workers, w.key)
	m.due.Remove(w)
	if w.cancel != nil {
		w.cancel()
	}
	if pe := m.pods[w.key.uid]; pe != nil {
		for i, x := range pe.workers {
			if x == w {
				pe.workers = append(pe.workers[:i], pe.workers[i+1:]...)
				break
			}
		}
	}
	m.metrics.forget(w)
}

// WorkerCount returns how many workers there are.
func (m *Manager) WorkerCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.workers)
}

// Result returns the published result of a container's probe of type t for
// its current container, and false when there is none (no such worker, no
// container seen yet, or a container that was running before the manager
// started and has not been probed yet).
func (m *Manager) Result(podUID types.UID, containerName string, t Type) (Result, bool) {
	u, ok := m.Latest(podUID, containerName, t)
	return u.Result, ok
}

// Latest is Result with the container ID and the message of the probe that
// set it.
func (m *Manager) Latest(podUID types.UID, containerName string, t Type) (Update, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.workers[workerKey{podUID, containerName, t}]
	if w == nil || !w.hasPub {
		return Update{}, false
	}
	return w.update(), true
}

// Subscribe returns a channel that receives every change of a published
// result from now on, in order for each probe, until ctx ends; then the
// channel is closed. buffer is the channel's capacity. A subscriber that
// does not read holds up the probes whose results change (as kubelet's
// results channel does), so read promptly.
func (m *Manager) Subscribe(ctx context.Context, buffer int) <-chan Update {
	if buffer < 0 {
		buffer = 0
	}
	ch := make(chan Update, buffer)
	var mu sync.Mutex // orders the sends before the close
	closed := false
	m.Notify(ctx, func(sendCtx context.Context, u Update) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		select {
		case ch <- u:
		case <-ctx.Done():
		case <-sendCtx.Done():
		}
	})
	context.AfterFunc(ctx, func() {
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
	})
	return ch
}

// Notify calls fn with every change of a published result from now on, in
// order for each probe, until ctx ends. fn runs on the goroutine that set
// the result (a probe worker under Run, the caller of SyncOnce), with that
// call's context, and holds the probe up until it returns: it should only
// note the change (a pod to sync) and return. A stepped caller that runs
// SyncOnce itself uses it instead of a channel that would have to hold a
// whole step's changes.
func (m *Manager) Notify(ctx context.Context, fn func(ctx context.Context, u Update)) {
	s := &subscriber{ctx: ctx, fn: fn}
	m.mu.Lock()
	m.subs = append(m.subs, s)
	m.mu.Unlock()
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		for i, x := range m.subs {
			if x == s {
				m.subs = append(m.subs[:i:i], m.subs[i+1:]...)
				break
			}
		}
		m.mu.Unlock()
	})
}

type subscriber struct {
	ctx context.Context
	fn  func(context.Context, Update)
}

func (s *subscriber) send(ctx context.Context, u Update) {
	if s.ctx.Err() != nil {
		return
	}
	s.fn(ctx, u)
}

// UpdatePodStatus sets Started and Ready in status's container statuses from
// the probe results, as kubelet does before it writes pod status: a
// container is started once its startup probe succeeded (at once without
// one) and ready once started, running and its readiness probe succeeded
// (at once without one). A started container whose readiness probe has not
// succeeded yet gets that probe run at once (the next SyncOnce, or Run
// without waiting), and its period restarts from then. Init containers that
// are not restartable are ready when they exited 0.
func (m *Manager) UpdatePodStatus(pod *corev1.Pod, status *corev1.PodStatus) {
	if pod == nil || status == nil {
		return
	}
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	fill := func(cs *corev1.ContainerStatus) {
		st := containerState{id: cs.ContainerID, started: cs.Started != nil && *cs.Started}
		if cs.State.Running != nil {
			st.running = true
			st.startedAt = cs.State.Running.StartedAt.Time
		}
		started := m.startedLocked(pod.UID, cs.Name, st)
		cs.Started = &started
		if !started {
			return
		}
		ready := false
		w := m.workers[workerKey{pod.UID, cs.Name, Readiness}]
		switch {
		case !st.running:
		case w == nil:
			ready = true
		case w.hasPub && w.pubID == cs.ContainerID:
			ready = w.pub == Success
			if !ready {
				m.triggerLocked(w, now)
			}
		default:
			// Not probed yet: ready only if it was before the agent
			// restarted (keepsReady); either way, probe it now.
			ready = m.keepsReady(readyPod(pod, m.pods[pod.UID]), st)
			m.triggerLocked(w, now)
		}
		cs.Ready = ready
	}
	for i := range status.ContainerStatuses {
		fill(&status.ContainerStatuses[i])
	}
	for i := range status.InitContainerStatuses {
		cs := &status.InitContainerStatuses[i]
		var spec *corev1.Container
		for j := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[j].Name == cs.Name {
				spec = &pod.Spec.InitContainers[j]
				break
			}
		}
		if spec == nil || !isRestartableInit(spec) {
			started := cs.State.Running != nil
			cs.Started = &started
			if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
				cs.Ready = true
			}
			continue
		}
		fill(cs)
	}
}

// readyPod is the pod whose Ready condition tells whether it was ready
// before a restart: the one given to AddPod, else pod.
func readyPod(pod *corev1.Pod, pe *podEntry) *corev1.Pod {
	if pe != nil && pe.pod != nil {
		return pe.pod
	}
	return pod
}

// startedLocked reports whether a container counts as started: running, and
// its startup probe succeeded for this container ID (or it has no startup
// probe, or its status already said it started and no result says otherwise).
func (m *Manager) startedLocked(uid types.UID, name string, c containerState) bool {
	if !c.running {
		return false
	}
	sw := m.workers[workerKey{uid, name, Startup}]
	if sw != nil && sw.hasPub && sw.pubID == c.id {
		return sw.pub == Success
	}
	if c.started {
		return true
	}
	return sw == nil
}

// keepsReady reports whether a container keeps Ready across an agent
// restart, as kubelet's readiness workers decide their initial result: the
// pod's Ready condition is True and the container is running since before
// the manager was created.
func (m *Manager) keepsReady(pod *corev1.Pod, c containerState) bool {
	if pod == nil || !c.running || c.startedAt.IsZero() || !c.startedAt.Before(m.start) {
		return false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// triggerLocked makes w due now, unless it is due already; a worker that is
// running is due again as soon as its run ends (the run may have read the
// pod before what triggered it).
func (m *Manager) triggerLocked(w *worker, now time.Time) {
	if w.removed {
		return
	}
	if w.running {
		w.retrigger = true
		return
	}
	if !w.next.After(now) {
		return
	}
	if _, scheduled := m.due.Due(w); !scheduled {
		return
	}
	w.next, w.retry = now, false
	m.due.Set(w, now)
	m.wakeLocked(now)
}

// wakeLocked wakes a waiting Run when t is earlier than its timer.
func (m *Manager) wakeLocked(t time.Time) {
	if !m.sleepUntil.IsZero() && t.Before(m.sleepUntil) {
		m.sleepUntil = time.Time{}
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// SyncOnce runs every probe that is due by the clock's now (and, when any
// is, those due within Options.Batch after it), returns when they have
// finished (or ctx ended), and returns how long to wait before the next
// probe falls due: the step of Run, for tests under a fake clock and for
// callers with a loop of their own. The wait is negative when no probe is
// scheduled (nothing is due until a pod is added). Its error is ctx's when
// ctx ended.
func (m *Manager) SyncOnce(ctx context.Context) (time.Duration, error) {
	var wg sync.WaitGroup
	return m.step(ctx, &wg)
}

// step is SyncOnce, and Run's step with wg nil: the probes it starts are
// not waited for, and the wait it returns is the one Run sleeps (so that
// triggerLocked wakes Run only for a probe due sooner).
func (m *Manager) step(ctx context.Context, wg *sync.WaitGroup) (time.Duration, error) {
	m.mu.Lock()
	m.dispatchLocked(ctx, wg, m.clock.Now())
	if wg != nil {
		m.mu.Unlock()
		wg.Wait()
		m.mu.Lock()
	}
	_, next, ok := m.due.Peek()
	if wg == nil {
		m.sleepUntil = farFuture
		if ok {
			m.sleepUntil = next
		}
	}
	m.mu.Unlock()
	if !ok {
		return loop.Never, ctx.Err()
	}
	return max(0, next.Sub(m.clock.Now())), ctx.Err()
}

// Run runs probes as they fall due until ctx ends, then waits for the probes
// in flight (which see ctx end) and returns nil: a loop over SyncOnce's
// step, which does not wait for the probes it starts.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrAlreadyRunning
	}
	m.running = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.running = false
		m.sleepUntil = time.Time{}
		for m.active > 0 {
			m.idle.Wait()
		}
		m.mu.Unlock()
	}()
	return loop.Run(ctx, m.clock, func(ctx context.Context) (time.Duration, error) {
		d, _ := m.step(ctx, nil)
		return d, nil
	}, loop.Signal(m.wake))
}

var farFuture = time.Unix(1<<62, 0)

// dispatchLocked queues every worker due by now (and those due within the
// batch window after it) and starts pool goroutines for them, up to
// maxActive in all.
func (m *Manager) dispatchLocked(ctx context.Context, wg *sync.WaitGroup, now time.Time) {
	horizon := now.Add(m.batch)
	if _, next, ok := m.due.Peek(); !ok || next.After(now) {
		return // nothing due yet: the window opens only when something is due
	}
	for {
		w, ok := m.due.PopDue(horizon.Add(-1))
		if !ok {
			break
		}
		w.running = true
		if wg != nil {
			wg.Add(1)
		}
		m.queue = append(m.queue, task{w: w, ctx: ctx, wg: wg})
	}
	for m.active < m.maxActive && m.active < len(m.queue)-m.queueHead {
		m.active++
		go m.poolLoop()
	}
}

// poolLoop takes tasks off the queue until it is empty.
func (m *Manager) poolLoop() {
	m.mu.Lock()
	for {
		if m.queueHead == len(m.queue) {
			m.queue = m.queue[:0]
			m.queueHead = 0
			m.active--
			if m.active == 0 {
				m.idle.Broadcast()
			}
			m.mu.Unlock()
			return
		}
		t := m.queue[m.queueHead]
		m.queue[m.queueHead] = task{}
		m.queueHead++
		w := t.w
		ran, keep := false, true
		if !w.removed && t.ctx.Err() == nil {
			ctx, cancel := context.WithCancel(t.ctx)
			w.cancel = cancel
			m.mu.Unlock()
			keep = m.doProbe(ctx, w)
			cancel()
			m.mu.Lock()
			w.cancel = nil
			ran = true
		}
		w.running = false
		if !w.removed {
			switch {
			case !keep:
				m.removeWorkerLocked(w)
			case ran:
				now := m.clock.Now()
				w.next = w.next.Add(w.period)
				w.retry = false
				if soon := now.Add(w.soon); w.soon > 0 && soon.Before(w.next) {
					w.next, w.retry = soon, true
				}
				if w.next.Before(now) || w.retrigger {
					w.next, w.retry = now, false
				}
				w.retrigger = false
				fallthrough
			default: // not run (the caller's ctx ended): still due
				m.due.Set(w, w.next)
				m.wakeLocked(w.next)
			}
		}
		if t.wg != nil {
			t.wg.Done()
		}
	}
}

// setResult publishes r for w's container id, telling subscribers when it
// changed.
func (m *Manager) setResult(ctx context.Context, w *worker, id string, r Result, msg string) {
	m.mu.Lock()
	if w.removed {
		m.mu.Unlock()
		return
	}
	changed := !w.hasPub || w.pubID != id || w.pub != r
	w.hasPub, w.pubID, w.pub, w.pubMsg = true, id, r, msg
	if !changed || len(m.subs) == 0 {
		m.mu.Unlock()
		return
	}
	u := w.update()
	subs := append([]*subscriber(nil), m.subs...)
	m.mu.Unlock()
	for _, s := range subs {
		s.send(ctx, u)
	}
}

func (m *Manager) clearResult(w *worker) {
	m.mu.Lock()
	w.hasPub = false
	m.mu.Unlock()
}

func specFor(c *corev1.Container, t Type) *corev1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	default:
		return c.StartupProbe
	}
}

func isRestartableInit(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// workerLogger returns the logger for a worker's messages.
func workerLogger(ctx context.Context, w *worker) klog.Logger {
	return klog.FromContext(ctx).WithValues("pod", klog.KObj(w.pod), "podUID", w.key.uid, "containerName", w.key.name, "probeType", w.key.typ)
}
