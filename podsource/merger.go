package podsource

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/podequal"
)

// ErrUnknownSource is returned by Merge for an update from a source the
// Merger was not built with.
var ErrUnknownSource = errors.New("podsource: unknown source")

// Event reasons the package records.
const (
	// ReasonFailedValidation: a pod rejected, for a duplicate full name or an
	// invalid manifest.
	ReasonFailedValidation = "FailedValidation"
)

// MergerOptions configures a Merger.
type MergerOptions struct {
	// Sources are the pod sources to run and merge. Required: at least one;
	// names must be unique and not empty.
	Sources []PodSource
	// Buffer is the capacity of the Updates channel. Default 50 (kubelet's);
	// 0 to 100000.
	Buffer *int
	// Recorder, if set, receives a Warning event for every pod rejected as a
	// duplicate. Default none.
	Recorder record.EventRecorder
	// Clock stamps the kubernetes.io/config.seen annotation. Default the real clock.
	Clock clock.PassiveClock
}

// Merger merges the full sets its sources send into one stream of
// incremental updates, as kubelet's pod config does.
//
// Each SET from a source is compared, by UID, with what that source sent
// before: new pods are ADD; pods whose spec, labels, deletion timestamp or
// grace period, or non-local annotations changed are UPDATE (or DELETE when
// graceful deletion began); pods whose status alone changed are RECONCILE
// (semantically: an empty list for none, or a time in another location, is
// no change); pods not in the set any more are REMOVE. Updates go out in
// the order REMOVE, ADD, UPDATE, DELETE, RECONCILE. A source's first SET, even an
// empty one, always yields at least one update (an empty ADD when there is
// nothing else), so a consumer can tell when every source has been seen.
//
// A full pod name (name and namespace) is kept once. Within one set the
// first pod wins, as in kubelet's pod config (which rejects the later ones);
// the File source has already settled duplicates among its own files the
// way kubelet's file store does (the file whose name sorts last is used), so
// this rule matters for the HTTP source's lists and for sources of the
// caller's. Across sources the source that holds the name keeps it. A
// rejected pod gets a log line and a Warning event. When the holder lets the
// name go, the other source's pod is admitted at once. Mirror pods are
// exempt: they share their static pod's name by design.
//
// The Merger annotates stored pods with kubernetes.io/config.source and, on
// ADD, kubernetes.io/config.seen (kept if the pod already has it). The
// pods it emits are shared, as kubelet's pod config shares them: each is
// the Merger's stored pod, a shallow copy of what the source sent with an
// annotations map of its own, so the consumer must not modify them (nor
// anything they point to); DeepCopy one to change it. Pods and StaticPods
// return deep copies.
type Merger struct {
	sources  []PodSource
	names    map[string]bool
	recorder record.EventRecorder
	clock    clock.PassiveClock
	updates  chan Update

	mu      sync.Mutex   // serialises merges and their sends
	stateMu sync.RWMutex // guards state and owner
	state   map[string]*sourceState
	// owner maps a full name to the source holding it.
	owner map[string]string

	seenMu   sync.RWMutex
	seen     map[string]bool
	allSeen  chan struct{}
	seenDone bool
}

type sourceState struct {
	pods     map[types.UID]*v1.Pod
	refs     map[types.UID]*v1.Pod // the pointers the source sent, to skip comparing pods it resends
	last     []*v1.Pod             // the last set as sent, for re-admitting rejected pods
	rejected map[types.UID]bool    // rejected in the last set
}

// NewMerger checks the options and returns a Merger. Run starts the sources.
func NewMerger(opts MergerOptions) (*Merger, error) {
	if len(opts.Sources) == 0 {
		return nil, optcheck.Required("podsource: MergerOptions.Sources")
	}
	m := &Merger{
		names:    make(map[string]bool, len(opts.Sources)),
		recorder: opts.Recorder,
		clock:    opts.Clock,
		state:    make(map[string]*sourceState, len(opts.Sources)),
		owner:    make(map[string]string),
		seen:     make(map[string]bool, len(opts.Sources)),
		allSeen:  make(chan struct{}),
	}
	for i, s := range opts.Sources {
		if s == nil {
			return nil, fmt.Errorf("podsource: MergerOptions.Sources[%d]: nil", i)
		}
		name := s.Name()
		if name == "" {
			return nil, fmt.Errorf("podsource: MergerOptions.Sources[%d]: empty name", i)
		}
		if m.names[name] {
			return nil, fmt.Errorf("podsource: MergerOptions.Sources[%d]: duplicate name %q", i, name)
		}
		m.names[name] = true
		m.sources = append(m.sources, s)
		m.state[name] = &sourceState{pods: map[types.UID]*v1.Pod{}}
	}
	buffer := 50
	if opts.Buffer != nil {
		buffer = *opts.Buffer
		if err := optcheck.Range("podsource: MergerOptions.Buffer", buffer, 0, 100000); err != nil {
			return nil, err
		}
	}
	m.updates = make(chan Update, buffer)
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	return m, nil
}

// Updates is the merged stream. It is never closed; select on your context.
func (m *Merger) Updates() <-chan Update { return m.updates }

// Run runs every source and merges what they send until ctx ends, then
// waits for the sources to return and returns nil. If a source returns an
// error, Run stops the others and returns it, naming the source.
func (m *Merger) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errList []error
	)
	fail := func(err error) {
		errMu.Lock()
		errList = append(errList, err)
		errMu.Unlock()
		cancel()
	}
	for _, src := range m.sources {
		ch := make(chan Update)
		name := src.Name()
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := src.Run(ctx, ch); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("podsource: source %q: %w", name, err))
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case u := <-ch:
					u.Source = name
					if err := m.Merge(ctx, u); err != nil && ctx.Err() == nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errList...)
}

// Merge applies one source's SET and sends the resulting updates, blocking
// while Updates is full. It is Run's step, exported for callers that drive
// sources themselves. Only OpSet is accepted. It returns ctx's error if ctx
// ends while sending.
func (m *Merger) Merge(ctx context.Context, u Update) error {
	if u.Op != OpSet {
		return fmt.Errorf("podsource: Merge: op %v: sources send only SET", u.Op)
	}
	if !m.names[u.Source] {
		return fmt.Errorf("%w %q", ErrUnknownSource, u.Source)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	logger := klog.FromContext(ctx)

	first := !m.hasSeen(u.Source)
	out, released := m.mergeLocked(logger, u.Source, u.Pods)
	m.markSeen(u.Source)
	if first && len(out) == 0 {
		out = append(out, Update{Op: OpAdd, Source: u.Source, Pods: []*v1.Pod{}})
	}
	if err := m.sendAll(ctx, out); err != nil {
		return err
	}
	// A released name may let another source's rejected pod in.
	for len(released) > 0 {
		var next []string
		for _, name := range m.sortedSources() {
			m.stateMu.RLock()
			st := m.state[name]
			retry := name != u.Source && len(st.rejected) > 0 && rejectsAny(st, released)
			last := st.last
			m.stateMu.RUnlock()
			if !retry {
				continue
			}
			more, rel := m.mergeLocked(logger, name, last)
			next = append(next, rel...)
			if err := m.sendAll(ctx, more); err != nil {
				return err
			}
		}
		released = next
	}
	return nil
}

func rejectsAny(st *sourceState, names []string) bool {
	for _, p := range st.last {
		if st.rejected[p.UID] {
			fn := FullName(p)
			for _, n := range names {
				if n == fn {
					return true
				}
			}
		}
	}
	return false
}

func (m *Merger) sortedSources() []string {
	names := make([]string, 0, len(m.names))
	for n := range m.names {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (m *Merger) sendAll(ctx context.Context, out []Update) error {
	for _, u := range out {
		select {
		case m.updates <- u:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// mergeLocked diffs a source's new set against its stored one and returns
// the non-empty updates, in kubelet's order, and the full names the source
// no longer holds.
func (m *Merger) mergeLocked(logger klog.Logger, source string, pods []*v1.Pod) ([]Update, []string) {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	st := m.state[source]
	old := st.pods
	next := make(map[types.UID]*v1.Pod, len(pods))
	refs := make(map[types.UID]*v1.Pod, len(pods))
	names := make(map[string]bool, len(pods))
	rejected := map[types.UID]bool{}
	var adds, updates, deletes, removes, reconciles []*v1.Pod

	for _, ref := range pods {
		if ref == nil {
			continue
		}
		if !IsMirrorPod(ref) {
			fn := FullName(ref)
			reason := ""
			if names[fn] {
				reason = "another pod from the same source has that name"
			} else if o, held := m.owner[fn]; held && o != source {
				reason = fmt.Sprintf("source %q already has a pod with that name", o)
			}
			if reason != "" {
				rejected[ref.UID] = true
				if !st.rejected[ref.UID] {
					logger.Info("Pod rejected for a duplicate full name, ignoring", "pod", klog.KObj(ref), "podUID", ref.UID, "source", source, "reason", reason)
					if m.recorder != nil {
						m.recorder.Eventf(ref, v1.EventTypeWarning, ReasonFailedValidation,
							"Error validating pod %s from %s due to duplicate pod name %q (%s), ignoring", klog.KObj(ref), source, ref.Name, reason)
					}
				}
				continue
			}
			names[fn] = true
		}
		if _, dup := next[ref.UID]; dup {
			continue
		}
		refs[ref.UID] = ref
		existing, found := old[ref.UID]
		if found && st.refs[ref.UID] == ref {
			// The very pod sent last time; sources do not modify what they sent.
			next[ref.UID] = existing
			continue
		}
		if !found {
			p := ref
			if _, seen := ref.Annotations[ConfigSeenAnnotation]; !seen || ref.Annotations[ConfigSourceAnnotation] != source {
				p = annotated(ref, 2)
				p.Annotations[ConfigSourceAnnotation] = source
				if _, ok := p.Annotations[ConfigSeenAnnotation]; !ok {
					p.Annotations[ConfigSeenAnnotation] = m.clock.Now().Format(time.RFC3339Nano)
				}
			}
			next[ref.UID] = p
			adds = append(adds, p)
			continue
		}
		if !differSemantically(existing, ref) {
			// Semantically: a status that differs only by an empty
			// list for none, or a time's location, says nothing new.
			if !podequal.Status(&existing.Status, &ref.Status) {
				// What the source sent, with the annotations held (the
				// same but for the local ones): the copy sent before
				// and what it shares with its source can go.
				p := ref
				if !carriesLocal(ref, existing, source) {
					cp := *ref
					cp.Annotations = existing.Annotations
					p = &cp
				}
				next[ref.UID] = p
				reconciles = append(reconciles, p)
				continue
			}
			next[ref.UID] = existing
			continue
		}
		p := ref
		if !carriesLocal(ref, existing, source) {
			p = annotated(ref, 3)
			for _, k := range localAnnotations {
				if v, ok := existing.Annotations[k]; ok {
					p.Annotations[k] = v
				} else {
					delete(p.Annotations, k)
				}
			}
			p.Annotations[ConfigSourceAnnotation] = source
		}
		next[ref.UID] = p
		if ref.DeletionTimestamp != nil {
			deletes = append(deletes, p)
		} else {
			updates = append(updates, p)
		}
	}
	for _, p := range old {
		if _, ok := next[p.UID]; !ok {
			removes = append(removes, p)
		}
	}
	sortByName(removes)

	// Hand names over.
	var released []string
	for fn, o := range m.owner {
		if o == source && !names[fn] {
			delete(m.owner, fn)
			released = append(released, fn)
		}
	}
	for fn := range names {
		m.owner[fn] = source
	}
	st.pods = next
	st.refs = refs
	st.last = pods
	st.rejected = rejected

	var out []Update
	for _, u := range []Update{
		{Op: OpRemove, Pods: removes},
		{Op: OpAdd, Pods: adds},
		{Op: OpUpdate, Pods: updates},
		{Op: OpDelete, Pods: deletes},
		{Op: OpReconcile, Pods: reconciles},
	} {
		if len(u.Pods) > 0 {
			u.Source = source
			out = append(out, u)
		}
	}
	sort.Strings(released)
	return out, released
}

// Annotations the node itself manages; changes to them are not updates.
var localAnnotations = []string{ConfigSourceAnnotation, ConfigMirrorAnnotation, ConfigSeenAnnotation}

func isLocalAnnotation(k string) bool {
	return k == ConfigSourceAnnotation || k == ConfigMirrorAnnotation || k == ConfigSeenAnnotation
}

// carriesLocal reports whether ref, a newer copy of existing from source,
// already carries the local annotations existing holds (source's name
// among them): then it is stored and sent as it is, not copied.
func carriesLocal(ref, existing *v1.Pod, source string) bool {
	if ref.Annotations[ConfigSourceAnnotation] != source {
		return false
	}
	for _, k := range localAnnotations {
		v, ok := existing.Annotations[k]
		if rv, rok := ref.Annotations[k]; ok != rok || rv != v {
			return false
		}
	}
	return true
}

func annotationsEqual(a, b map[string]string) bool {
	for k, v := range b {
		if isLocalAnnotation(k) {
			continue
		}
		if av, ok := a[k]; !ok || av != v {
			return false
		}
	}
	for k := range a {
		if isLocalAnnotation(k) {
			continue
		}
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func differSemantically(existing, ref *v1.Pod) bool {
	return !reflect.DeepEqual(existing.Spec, ref.Spec) ||
		!reflect.DeepEqual(existing.Labels, ref.Labels) ||
		!reflect.DeepEqual(existing.DeletionTimestamp, ref.DeletionTimestamp) ||
		!reflect.DeepEqual(existing.DeletionGracePeriodSeconds, ref.DeletionGracePeriodSeconds) ||
		!annotationsEqual(existing.Annotations, ref.Annotations)
}

// annotated returns a shallow copy of ref (sharing everything but the
// annotations with it) with a map of its own holding ref's annotations and
// room for extra more: the Merger's stored and emitted pod.
func annotated(ref *v1.Pod, extra int) *v1.Pod {
	p := *ref
	p.Annotations = make(map[string]string, len(ref.Annotations)+extra)
	for k, v := range ref.Annotations {
		p.Annotations[k] = v
	}
	return &p
}

func sortByName(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		if pods[i].Name != pods[j].Name {
			return pods[i].Name < pods[j].Name
		}
		return pods[i].UID < pods[j].UID
	})
}

func (m *Merger) hasSeen(source string) bool {
	m.seenMu.RLock()
	defer m.seenMu.RUnlock()
	return m.seen[source]
}

func (m *Merger) markSeen(source string) {
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	m.seen[source] = true
	if !m.seenDone && len(m.seen) == len(m.names) {
		m.seenDone = true
		close(m.allSeen)
	}
}

// SeenAllSources reports whether every source has sent its first set. Until
// then, a consumer must not treat a pod's absence as a removal (kubelet does
// not clean up orphaned pods before this).
func (m *Merger) SeenAllSources() bool {
	m.seenMu.RLock()
	defer m.seenMu.RUnlock()
	return m.seenDone
}

// SeenAllSourcesC returns a channel closed once SeenAllSources is true.
func (m *Merger) SeenAllSourcesC() <-chan struct{} { return m.allSeen }

// Pods returns deep copies of the merged pods of the named sources (all
// sources when none are named), sorted by namespace and name.
func (m *Merger) Pods(sources ...string) []*v1.Pod {
	m.stateMu.RLock()
	defer m.stateMu.RUnlock()
	if len(sources) == 0 {
		sources = m.sortedSources()
	}
	var out []*v1.Pod
	for _, s := range sources {
		st, ok := m.state[s]
		if !ok {
			continue
		}
		for _, p := range st.pods {
			out = append(out, p.DeepCopy())
		}
	}
	sortByName(out)
	return out
}

// StaticPods returns deep copies of the merged pods from every source but
// the API server: what MirrorPodsOptions.StaticPods wants.
func (m *Merger) StaticPods() []*v1.Pod {
	var names []string
	for _, n := range m.sortedSources() {
		if n != APISource {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return m.Pods(names...)
}
