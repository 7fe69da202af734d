package eviction

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/pressure"
	"github.com/nodekit/nodekit/podsync/admission"
)

// Kubelet's values: Reason of an evicted or rejected pod (status and
// event), the node event when a threshold drives an eviction, and the grace
// period of a pod evicted for a hard threshold.
const (
	Reason                      = "Evicted"
	EventEvictionThresholdMet   = "EvictionThresholdMet"
	ImmediateGracePeriodSeconds = 1
)

// Annotations on the Evicted event, as kubelet writes them.
const (
	AnnotationOffendingContainers      = "offending_containers"
	AnnotationOffendingContainersUsage = "offending_containers_usage"
	AnnotationStarvedResource          = "starved_resource"
)

// Defaults and bounds of Options.
const (
	DefaultPeriod                   = 10 * time.Second
	DefaultPressureTransitionPeriod = pressure.DefaultTransitionPeriod
	// PodCleanupTimeout and PodCleanupPoll bound the wait for an evicted
	// pod to be cleaned up (Options.PodCleanedUp), as kubelet's.
	PodCleanupTimeout = 30 * time.Second
	PodCleanupPoll    = time.Second
)

// Options configure a Manager. The zero value of a field means its
// default, stated in its comment.
type Options struct {
	// NodeName names the node in the EvictionThresholdMet and condition
	// events. Required.
	NodeName string
	// Observer reports the node's and the pods' usage. Required.
	Observer Observer
	// ActivePods returns the pods that may be evicted: admitted, not yet
	// terminated (kubelet's active pods). Required. The manager does not
	// change them.
	ActivePods func() []*corev1.Pod
	// Killer stops an evicted pod. Required.
	Killer Killer
	// Reclaimers free node-level resources before a pod is evicted for a
	// disk signal (image GC, dead-container GC), in order. Default none.
	Reclaimers []Reclaimer

	// EvictionHard is kubelet's evictionHard: signal → "100Mi" or "10%".
	// Default (nil) kubelet's, nodestatus.DefaultEvictionHard():
	// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
	// imagefs.available<15%, imagefs.inodesFree<5%. An empty non-nil map
	// means no hard thresholds.
	EvictionHard map[string]string
	// EvictionSoft is kubelet's evictionSoft. Default none. Each needs an
	// EvictionSoftGracePeriod.
	EvictionSoft map[string]string
	// EvictionSoftGracePeriod is kubelet's evictionSoftGracePeriod:
	// signal → Go duration ("1m30s").
	EvictionSoftGracePeriod map[string]string
	// EvictionMinimumReclaim is kubelet's evictionMinimumReclaim: signal →
	// quantity or percentage. Default none.
	EvictionMinimumReclaim map[string]string
	// AllocatableThresholds adds an allocatableMemory.available threshold
	// for each hard memory.available one, as kubelet does when
	// enforceNodeAllocatable contains "pods" (its default). Default false,
	// since nodekit does not enforce node allocatable on the pods' cgroup.
	AllocatableThresholds bool
	// PressureTransitionPeriod is kubelet's
	// evictionPressureTransitionPeriod: how long a pressure condition stays
	// True after its last threshold stopped being met. Default 5m; 1s–1h.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriod is kubelet's evictionMaxPodGracePeriod: the grace
	// period, in seconds, of a pod evicted for a soft threshold (or its
	// terminationGracePeriodSeconds when that is shorter). Default 0;
	// not negative. Hard evictions use 1s.
	MaxPodGracePeriod int64
	// Period is Run's interval between syncs, kubelet's eviction
	// monitoring interval. Default 10s; 1s–5m.
	Period time.Duration
	// PodCleanedUp, when set, reports whether an evicted pod's resources
	// are released; after an eviction SyncOnce polls it every second (the
	// wait it returns) for up to 30s and then syncs at once, as kubelet
	// does. Default nil: the next sync is a Period later.
	PodCleanedUp func(pod *corev1.Pod) bool
	// IgnoreLocalStorageLimits turns off the evictions for local storage
	// limits (kubelet's localStorageCapacityIsolation: false): an emptyDir
	// over its sizeLimit, a container over its ephemeral-storage limit, a
	// pod over the sum of its containers'. Default false: they are
	// evicted, as by kubelet.
	IgnoreLocalStorageLimits bool

	// Clock is the time source. Default the real clock.
	Clock clock.WithTicker
	// Registerer receives kubelet_evictions{eviction_signal} and
	// kubelet_eviction_stats_age_seconds{eviction_signal}. Default none.
	Registerer prometheus.Registerer
	// Recorder receives the Evicted events on pods, EvictionThresholdMet
	// and the condition changes on the node. Default none.
	Recorder record.EventRecorder
}

func (o Options) withDefaults() (Options, []Threshold, error) {
	switch {
	case o.NodeName == "":
		return o, nil, optcheck.Required("eviction: Options.NodeName")
	case o.Observer == nil:
		return o, nil, optcheck.Required("eviction: Options.Observer")
	case o.ActivePods == nil:
		return o, nil, optcheck.Required("eviction: Options.ActivePods")
	case o.Killer == nil:
		return o, nil, optcheck.Required("eviction: Options.Killer")
	}
	if o.EvictionHard == nil {
		o.EvictionHard = pressure.DefaultEvictionHard()
	}
	ts, err := ParseThresholds(o.EvictionHard, o.EvictionSoft, o.EvictionSoftGracePeriod, o.EvictionMinimumReclaim)
	if err != nil {
		return o, nil, err
	}
	if o.AllocatableThresholds {
		ts = WithAllocatable(ts)
	}
	if o.PressureTransitionPeriod == 0 {
		o.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if err := optcheck.Range("eviction: Options.PressureTransitionPeriod", o.PressureTransitionPeriod, time.Second, time.Hour); err != nil {
		return o, nil, err
	}
	if o.MaxPodGracePeriod < 0 {
		return o, nil, optcheck.AtLeast("eviction", "MaxPodGracePeriod", o.MaxPodGracePeriod, 0)
	}
	if o.Period == 0 {
		o.Period = DefaultPeriod
	}
	if err := optcheck.Range("eviction: Options.Period", o.Period, time.Second, 5*time.Minute); err != nil {
		return o, nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, ts, nil
}

// State is what the last sync found, published for readers.
type State struct {
	// Conditions are the pressure conditions that hold (met within the
	// transition period), in the order MemoryPressure, DiskPressure,
	// PIDPressure.
	Conditions []corev1.NodeConditionType
	// Met are the thresholds met whose grace periods have passed, in the
	// order they are reclaimed (memory first).
	Met []Threshold
	// Synced is when the last sync that observed the node ran; zero
	// before one has.
	Synced time.Time
}

// Manager is kubelet's eviction manager: it watches the eviction signals,
// reports the pressure conditions, and evicts one pod at a time to
// relieve them.
type Manager struct {
	o          Options
	thresholds []Threshold
	metrics    *metrics
	nodeRef    *corev1.ObjectReference

	mu            sync.Mutex  // serializes syncs and guards what follows
	firstObserved []time.Time // by threshold index; zero when not met
	condObserved  [pressure.NumConditions]time.Time
	met           []int // thresholds met past their grace period
	lastStats     time.Time
	cleanup       *corev1.Pod // evicted, not yet cleaned up (PodCleanedUp)
	cleanupBy     time.Time   // when the wait for cleanup ends

	state atomic.Pointer[State]
}

// New checks o and returns a Manager.
func New(o Options) (*Manager, error) {
	o, ts, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("eviction: Options.Registerer: %w", err)
	}
	m := &Manager{
		o: o, thresholds: ts, metrics: met,
		nodeRef:       &corev1.ObjectReference{Kind: "Node", Name: o.NodeName, UID: types.UID(o.NodeName)},
		firstObserved: make([]time.Time, len(ts)),
	}
	m.state.Store(&State{})
	return m, nil
}

// Thresholds returns the thresholds in force, hard then soft.
func (m *Manager) Thresholds() []Threshold { return slices.Clone(m.thresholds) }

// State returns what the last sync found. It never waits on a sync.
func (m *Manager) State() State {
	s := *m.state.Load()
	s.Conditions = slices.Clone(s.Conditions)
	s.Met = slices.Clone(s.Met)
	return s
}

// IsUnderMemoryPressure reports whether MemoryPressure holds.
func (m *Manager) IsUnderMemoryPressure() bool { return m.hasCondition(corev1.NodeMemoryPressure) }

// IsUnderDiskPressure reports whether DiskPressure holds.
func (m *Manager) IsUnderDiskPressure() bool { return m.hasCondition(corev1.NodeDiskPressure) }

// IsUnderPIDPressure reports whether PIDPressure holds.
func (m *Manager) IsUnderPIDPressure() bool { return m.hasCondition(corev1.NodePIDPressure) }

func (m *Manager) hasCondition(c corev1.NodeConditionType) bool {
	return slices.Contains(m.state.Load().Conditions, c)
}

// observation is one signal's observed value.
type observation struct {
	available, capacity int64
	format              resource.Format
	ok                  bool
}

type observations map[Signal]observation

func observe(s *Snapshot) observations {
	signals := pressure.Signals()
	obs := make(observations, len(signals))
	for _, sig := range signals {
		if o, ok := observeSignal(sig, s); ok {
			obs[Signal(sig.Name)] = o
		}
	}
	return obs
}

// observeSignal is sig observed on s: what is available of its capacity.
// ok is false when s has no statistics of the signal's source (for
// inodes, when the file system reports none).
func observeSignal(sig pressure.Signal, s *Snapshot) (o observation, ok bool) {
	mem := func(m *MemoryStats) (observation, bool) {
		if m == nil {
			return observation{}, false
		}
		return observation{int64(m.AvailableBytes), int64(m.AvailableBytes + m.WorkingSetBytes), resource.BinarySI, true}, true
	}
	fs := func(f *FsStats) (observation, bool) {
		switch {
		case f == nil:
			return observation{}, false
		case !sig.Inodes():
			return observation{int64(f.AvailableBytes), int64(f.CapacityBytes), resource.BinarySI, true}, true
		case f.Inodes > 0:
			return observation{int64(f.InodesFree), int64(f.Inodes), resource.DecimalSI, true}, true
		}
		return observation{}, false
	}
	switch sig.Source {
	case pressure.SourceMemory:
		return mem(s.Memory)
	case pressure.SourceAllocatableMemory:
		return mem(s.AllocatableMemory)
	case pressure.SourceNodeFS:
		return fs(s.NodeFS)
	case pressure.SourceImageFS:
		return fs(s.ImageFS)
	case pressure.SourcePIDs:
		if p := s.PIDs; p != nil {
			return observation{int64(p.MaxPID) - int64(p.Running), int64(p.MaxPID), resource.DecimalSI, true}, true
		}
	}
	return observation{}, false
}

// met reports whether t is met by obs: what is available is less than the
// threshold, plus its minimum reclaim when enforceMinReclaim.
func met(t *Threshold, obs observations, enforceMinReclaim bool) bool {
	o, ok := obs[t.Signal]
	if !ok || !o.ok {
		return false
	}
	limit := t.Value.amount(o.capacity)
	if enforceMinReclaim && t.MinReclaim != nil {
		limit += t.MinReclaim.amount(o.capacity)
	}
	return o.available < limit
}

// SyncOnce is the manager's step, the one Run loops: it observes the node,
// updates the pressure conditions and, when a threshold is met past its
// grace period, reclaims node-level resources for a disk signal and, if
// that was not enough, evicts at most one pod. It returns how long to wait
// before the next call: Period, or, after an eviction with PodCleanedUp
// set, PodCleanupPoll. While an evicted pod is not cleaned up, a call only
// asks PodCleanedUp again (and returns the next poll's wait); once it is,
// or PodCleanupTimeout after the eviction, the call syncs, as kubelet does.
// An error is returned when the node could not be observed (nothing
// changes then) or the Killer failed (the eviction still counts, as
// kubelet's does); the wait is returned with it.
func (m *Manager) SyncOnce(ctx context.Context) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cleanup != nil {
		now := m.o.Clock.Now()
		switch {
		case !now.Before(m.cleanupBy):
			klog.FromContext(ctx).Info("Eviction manager: timed out waiting for pod to be cleaned up", "pod", klog.KObj(m.cleanup))
		case !m.o.PodCleanedUp(m.cleanup):
			return min(PodCleanupPoll, m.cleanupBy.Sub(now)), nil
		}
		m.cleanup = nil
	}
	evicted, err := m.sync(ctx)
	if evicted != nil && m.o.PodCleanedUp != nil {
		m.cleanup = evicted
		m.cleanupBy = m.o.Clock.Now().Add(PodCleanupTimeout)
		return PodCleanupPoll, err
	}
	return m.o.Period, err
}

// Run loops SyncOnce until ctx ends, waiting on the clock as long as each
// call asks: every Period, or, after an eviction with PodCleanedUp set,
// polling it every second until the pod is cleaned up or 30s have passed,
// then syncing at once. Sync errors are logged; Run returns nil.
func (m *Manager) Run(ctx context.Context) error {
	log := klog.FromContext(ctx)
	return loop.Run(ctx, m.o.Clock, func(ctx context.Context) (time.Duration, error) {
		d, err := m.SyncOnce(ctx)
		if err != nil {
			log.Error(err, "Eviction manager: sync failed")
		}
		return d, nil
	})
}

// sync observes and evicts, SyncOnce's work with m.mu held; it returns
// the pod it evicted.
func (m *Manager) sync(ctx context.Context) (*corev1.Pod, error) {
	if len(m.thresholds) == 0 && m.o.IgnoreLocalStorageLimits {
		return nil, nil
	}
	log := klog.FromContext(ctx)
	pods := m.o.ActivePods()
	snap, err := m.o.Observer.Observe(ctx)
	if err != nil {
		return nil, fmt.Errorf("eviction: observe: %w", err)
	}
	if snap == nil {
		snap = &Snapshot{}
	}
	obs := observe(snap)
	now := m.o.Clock.Now()

	// Thresholds met now (grace periods aside), and those that drove
	// evictions and have not yet reclaimed their minimum.
	current := make([]bool, len(m.thresholds))
	for i := range m.thresholds {
		current[i] = met(&m.thresholds[i], obs, false)
	}
	for _, i := range m.met {
		if !current[i] && met(&m.thresholds[i], obs, true) {
			current[i] = true
		}
	}
	for i, on := range current {
		switch {
		case !on:
			m.firstObserved[i] = time.Time{}
		case m.firstObserved[i].IsZero():
			m.firstObserved[i] = now
		}
		if on {
			m.condObserved[pressure.ConditionIndex(m.thresholds[i].Signal.Condition())] = now
		}
	}
	var conds []corev1.NodeConditionType
	for c, spec := range pressure.Conditions() {
		if pressure.Under(m.condObserved[c], now, m.o.PressureTransitionPeriod) {
			conds = append(conds, spec.Type)
		}
	}
	m.met = m.met[:0]
	for i, on := range current {
		if on && now.Sub(m.firstObserved[i]) >= m.thresholds[i].GracePeriod {
			m.met = append(m.met, i)
		}
	}
	// Memory thresholds are reclaimed first; the others keep their order.
	slices.SortStableFunc(m.met, func(a, b int) int {
		ia, _ := m.thresholds[a].Signal.info()
		ib, _ := m.thresholds[b].Signal.info()
		return cmpTrueFirst(ia.Memory(), ib.Memory())
	})
	metTs := make([]Threshold, len(m.met))
	for j, i := range m.met {
		metTs[j] = m.thresholds[i]
	}
	m.state.Store(&State{Conditions: conds, Met: metTs, Synced: now})

	// Local storage limits come first; a sync that evicts for them does
	// nothing else.
	if !m.o.IgnoreLocalStorageLimits {
		if evicted, err := m.localStorageEviction(ctx, pods, snap); evicted != nil || err != nil {
			return evicted, err
		}
	}

	stale := !snap.Time.IsZero() && snap.Time.Equal(m.lastStats)
	m.lastStats = snap.Time
	if len(metTs) == 0 || stale {
		return nil, nil
	}
	t := metTs[0]
	res := t.Signal.Resource()
	log.Info("Eviction manager: attempting to reclaim", "resourceName", res)
	m.event(m.nodeRef, nil, corev1.EventTypeWarning, EventEvictionThresholdMet, "Attempting to reclaim "+string(res))

	if m.reclaim(ctx, t.Signal, snap.DedicatedImageFS) {
		log.Info("Eviction manager: able to reduce resource pressure without evicting pods.", "resourceName", res)
		return nil, nil
	}
	if len(pods) == 0 {
		log.Error(nil, "Eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil, nil
	}
	idx := indexUsage(snap)
	ranked := slices.Clone(pods)
	rankWith(ranked, t.Signal, snap, idx)
	if !snap.Time.IsZero() {
		for _, mt := range metTs {
			m.metrics.statsAge.WithLabelValues(string(mt.Signal)).Observe(now.Sub(snap.Time).Seconds())
		}
	}
	for _, pod := range ranked {
		if admission.IsCritical(pod) {
			log.Error(nil, "Eviction manager: cannot evict a critical pod", "pod", klog.KObj(pod))
			continue
		}
		grace := int64(ImmediateGracePeriodSeconds)
		if !t.Hard() {
			grace = m.o.MaxPodGracePeriod
			if tg := pod.Spec.TerminationGracePeriodSeconds; tg != nil {
				grace = min(grace, *tg)
			}
		}
		msg, ann := evictionMessage(res, pod, idx[pod.UID], metTs, obs)
		status := corev1.PodStatus{
			Phase:   corev1.PodFailed,
			Reason:  Reason,
			Message: msg,
			Conditions: []corev1.PodCondition{{
				Type:               corev1.DisruptionTarget,
				Status:             corev1.ConditionTrue,
				Reason:             corev1.PodReasonTerminationByKubelet,
				Message:            msg,
				ObservedGeneration: pod.Generation,
				LastTransitionTime: metav1.NewTime(now),
			}},
		}
		m.event(pod, ann, corev1.EventTypeWarning, Reason, msg)
		err := m.o.Killer.Evict(ctx, pod, status, grace)
		m.metrics.evictions.WithLabelValues(string(t.Signal)).Inc()
		if err != nil {
			return pod, fmt.Errorf("eviction: evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		log.Info("Eviction manager: pod is evicted successfully", "pod", klog.KObj(pod))
		return pod, nil
	}
	log.Info("Eviction manager: unable to evict any pods from the node")
	return nil, nil
}

// reclaim runs the reclaimers for a disk signal and observes again; it
// reports whether no threshold (minimum reclaim included, grace periods
// aside) is met any more. With a dedicated image file system only imagefs
// signals are reclaimed, as kubelet's image and container GC free only
// that one.
func (m *Manager) reclaim(ctx context.Context, s Signal, dedicatedImageFS bool) bool {
	info, _ := s.info()
	if !info.Disk() || len(m.o.Reclaimers) == 0 {
		return false
	}
	if dedicatedImageFS && info.Source == pressure.SourceNodeFS {
		return false
	}
	log := klog.FromContext(ctx)
	for _, r := range m.o.Reclaimers {
		freed, err := r.Reclaim(ctx, s)
		if err != nil {
			log.Info("Eviction manager: unexpected error when attempting to reduce resource pressure", "resourceName", s.Resource(), "err", err)
		}
		log.V(3).Info("Eviction manager: reclaimed", "signal", s, "bytes", freed)
	}
	snap, err := m.o.Observer.Observe(ctx)
	if err != nil {
		log.Error(err, "Eviction manager: failed to observe after resource reclaim")
		return false
	}
	if snap == nil {
		return false
	}
	obs := observe(snap)
	for i := range m.thresholds {
		if met(&m.thresholds[i], obs, true) {
			return false
		}
	}
	return true
}

// evictionMessage is kubelet's message for a pod evicted to reclaim res,
// and the annotations of its event.
func evictionMessage(res corev1.ResourceName, pod *corev1.Pod, u *PodUsage, metTs []Threshold, obs observations) (string, map[string]string) {
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %v. ", res)
	for _, t := range metTs {
		if t.Signal.Resource() != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok && o.ok {
			q := t.Value.quantity(o.capacity)
			fmt.Fprintf(&b, "Threshold quantity: %v, available: %v. ", q.String(), resource.NewQuantity(o.available, o.format).String())
		}
		break
	}
	ann := map[string]string{}
	if u == nil {
		return b.String(), ann
	}
	var names, usages []string
	for _, cu := range u.Containers {
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if c.Name != cu.Name {
				continue
			}
			var used *resource.Quantity
			switch res {
			case corev1.ResourceMemory:
				used = resource.NewQuantity(int64(cu.MemoryWorkingSetBytes), resource.BinarySI)
			case corev1.ResourceEphemeralStorage:
				used = resource.NewQuantity(int64(cu.RootfsBytes+cu.LogsBytes), resource.BinarySI)
			}
			req := c.Resources.Requests[res]
			if used != nil && used.Cmp(req) > 0 {
				fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of %v. ", c.Name, used.String(), req.String(), res)
				names = append(names, c.Name)
				usages = append(usages, used.String())
			}
		}
	}
	ann[AnnotationStarvedResource] = string(res)
	ann[AnnotationOffendingContainers] = strings.Join(names, ",")
	ann[AnnotationOffendingContainersUsage] = strings.Join(usages, ",")
	return b.String(), ann
}

// event records an event when there is a Recorder.
func (m *Manager) event(obj runtime.Object, ann map[string]string, eventType, reason, msg string) {
	if m.o.Recorder == nil {
		return
	}
	if ann != nil {
		m.o.Recorder.AnnotatedEventf(obj, ann, eventType, reason, "%s", msg)
		return
	}
	m.o.Recorder.Event(obj, eventType, reason, msg)
}
