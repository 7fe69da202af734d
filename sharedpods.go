package nodekit

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/listwatch"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/podsource"
)

// BoundPodsSelector is SharedPodsOptions.FieldSelector's default: every
// pod bound to a node.
const BoundPodsSelector = "spec.nodeName!="

// SharedPodsOptions configure NewSharedPods.
type SharedPodsOptions struct {
	// Pods lists and watches pods in all namespaces (API.Pods("")). The
	// credentials must be allowed to list every pod the field selector
	// matches: a node identity may list only its own. Required.
	Pods podsource.APIPodClient
	// FieldSelector selects the pods watched. Default BoundPodsSelector.
	FieldSelector string
	// Nodes, when set, says which nodes' pods to keep (a fleet shard's);
	// the others' are dropped as they arrive. Default: every node's.
	Nodes func(name string) bool
	// MaxRetryWait bounds the wait between two lists after a failure.
	// Default podsource.DefaultMaxRetryWait (10s); 1s to 10m.
	MaxRetryWait time.Duration
	// Clock drives the reflector's back-off. Default the real clock.
	Clock clock.Clock
}

// SharedPods is one list and watch of the pods bound to many nodes (a
// fleet's), instead of one per node: a pod half given it
// (PodHalfOptions.SharedPods) takes its API pods from it. Pods are kept by
// the node they are bound to; a change calls that node's OnChange function.
type SharedPods struct {
	o SharedPodsOptions

	mu     sync.Mutex
	nodes  map[string]*boundPods
	where  map[string]string // pod key -> node
	synced bool
}

type boundPods struct {
	pods     map[string]*corev1.Pod // by namespace/name
	gen      uint64
	onChange func()
}

// NewSharedPods checks o and returns a SharedPods; Run watches.
func NewSharedPods(o SharedPodsOptions) (*SharedPods, error) {
	if o.Pods == nil {
		return nil, optcheck.Required("nodekit: SharedPodsOptions.Pods")
	}
	if o.FieldSelector == "" {
		o.FieldSelector = BoundPodsSelector
	}
	switch {
	case o.MaxRetryWait == 0:
		o.MaxRetryWait = podsource.DefaultMaxRetryWait
	case o.MaxRetryWait < time.Second || o.MaxRetryWait > 10*time.Minute:
		return nil, optcheck.Range("nodekit: SharedPodsOptions.MaxRetryWait", o.MaxRetryWait, time.Second, 10*time.Minute)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &SharedPods{o: o, nodes: map[string]*boundPods{}, where: map[string]string{}}, nil
}

// OnChange sets the function called (without locks held) whenever the
// pods bound to node change, and once when the first list is done.
func (s *SharedPods) OnChange(node string, fn func()) {
	s.mu.Lock()
	s.nodeLocked(node).onChange = fn
	s.mu.Unlock()
}

// NodePods returns the pods bound to node (the store's: not to be
// modified; without managed fields, and with the config.source and
// config.seen annotations a node's merger adds), a number that changes
// whenever they do, and whether the first list is done.
func (s *SharedPods) NodePods(node string) (pods []*corev1.Pod, gen uint64, synced bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.nodes[node]
	if b == nil {
		return nil, 0, s.synced
	}
	pods = make([]*corev1.Pod, 0, len(b.pods))
	for _, p := range b.pods {
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	return pods, b.gen, s.synced
}

// nodeGen is NodePods's number and first-list flag alone, without the
// list: a pod half's step asks it first and lists only after a change.
func (s *SharedPods) nodeGen(node string) (gen uint64, synced bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.nodes[node]; b != nil {
		gen = b.gen
	}
	return gen, s.synced
}

// Synced reports whether the first list is done.
func (s *SharedPods) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

func (s *SharedPods) nodeLocked(node string) *boundPods {
	b := s.nodes[node]
	if b == nil {
		b = &boundPods{pods: map[string]*corev1.Pod{}}
		s.nodes[node] = b
	}
	return b
}

// Run lists and watches the pods until ctx ends.
func (s *SharedPods) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("source", "shared pods")
	lw := listwatch.Selected(s.o.Pods.List, s.o.Pods.Watch, s.o.FieldSelector)
	capWait := s.o.MaxRetryWait * 2 / 3
	r := cache.NewReflectorWithOptions(lw, &corev1.Pod{}, sharedStore{s}, cache.ReflectorOptions{
		Name:   "shared-pods",
		Logger: &logger,
		Clock:  s.o.Clock,
		Backoff: &wait.Backoff{
			Duration: min(800*time.Millisecond, capWait),
			Factor:   2,
			Jitter:   0.5,
			Cap:      capWait,
			Steps:    math.MaxInt32,
		},
	})
	r.RunWithContext(ctx)
	return nil
}

// apply replaces (pod non-nil) or removes the pod under key and returns
// the functions to call for the nodes that changed.
func (s *SharedPods) applyLocked(key string, pod *corev1.Pod, calls map[string]func()) {
	if old, ok := s.where[key]; ok && (pod == nil || old != pod.Spec.NodeName) {
		b := s.nodes[old]
		delete(b.pods, key)
		b.gen++
		calls[old] = b.onChange
		delete(s.where, key)
	}
	if pod == nil || pod.Spec.NodeName == "" || s.o.Nodes != nil && !s.o.Nodes(pod.Spec.NodeName) {
		return
	}
	b := s.nodeLocked(pod.Spec.NodeName)
	b.pods[key] = pod
	b.gen++
	calls[pod.Spec.NodeName] = b.onChange
	s.where[key] = pod.Spec.NodeName
}

func callAll(calls map[string]func()) {
	for _, fn := range calls {
		if fn != nil {
			fn()
		}
	}
}

// sharedStore is the reflector's store: it files each pod under its node.
type sharedStore struct{ s *SharedPods }

func podKey(obj any) (string, *corev1.Pod, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
		if p, ok := obj.(*corev1.Pod); ok {
			return p.Namespace + "/" + p.Name, nil, nil
		}
		return d.Key, nil, nil
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return "", nil, fmt.Errorf("nodekit: shared pods: %T is not a Pod", obj)
	}
	return p.Namespace + "/" + p.Name, p, nil
}

func (st sharedStore) upsert(obj any, remove bool) error {
	key, pod, err := podKey(obj)
	if err != nil {
		return err
	}
	calls := map[string]func(){}
	st.s.mu.Lock()
	if remove {
		pod = nil
	} else {
		pod = st.s.storedLocked(key, pod)
	}
	st.s.applyLocked(key, pod, calls)
	st.s.mu.Unlock()
	callAll(calls)
	return nil
}

func (st sharedStore) Add(obj any) error    { return st.upsert(obj, false) }
func (st sharedStore) Update(obj any) error { return st.upsert(obj, false) }
func (st sharedStore) Delete(obj any) error { return st.upsert(obj, true) }

func (st sharedStore) List() []any {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	var out []any
	for _, b := range st.s.nodes {
		for _, p := range b.pods {
			out = append(out, p)
		}
	}
	return out
}

func (st sharedStore) ListKeys() []string {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	out := make([]string, 0, len(st.s.where))
	for k := range st.s.where {
		out = append(out, k)
	}
	return out
}

func (st sharedStore) Get(obj any) (any, bool, error) {
	key, _, err := podKey(obj)
	if err != nil {
		return nil, false, err
	}
	return st.GetByKey(key)
}

func (st sharedStore) GetByKey(key string) (any, bool, error) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	node, ok := st.s.where[key]
	if !ok {
		return nil, false, nil
	}
	return st.s.nodes[node].pods[key], true, nil
}

// Replace takes a full list: pods missing from it are removed, and every
// node is told once the first list is done.
func (st sharedStore) Replace(objs []any, _ string) error {
	s := st.s
	calls := map[string]func(){}
	s.mu.Lock()
	keep := make(map[string]bool, len(objs))
	for _, o := range objs {
		key, pod, err := podKey(o)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		keep[key] = true
		if old := s.podLocked(key); old == nil || old.UID != pod.UID || pod.ResourceVersion == "" || old.ResourceVersion != pod.ResourceVersion {
			s.applyLocked(key, s.storedLocked(key, pod), calls)
		}
	}
	for key := range s.where {
		if !keep[key] {
			s.applyLocked(key, nil, calls)
		}
	}
	if !s.synced {
		s.synced = true
		for name, b := range s.nodes {
			b.gen++
			calls[name] = b.onChange
		}
	}
	s.mu.Unlock()
	callAll(calls)
	return nil
}

func (s *SharedPods) podLocked(key string) *corev1.Pod {
	if node, ok := s.where[key]; ok {
		return s.nodes[node].pods[key]
	}
	return nil
}

func (sharedStore) Resync() error { return nil }

// storedLocked is what the store keeps of pod, the newest copy of the pod
// under key: a shallow copy (the watch's object may be shared) without
// managed fields (nothing here reads them, and they are much of a pod's
// size), with the annotations a node's podsource.Merger would add to it:
// kubernetes.io/config.source "api" and config.seen, when this store first
// saw the pod (kept across its updates). The merger then sends the store's
// pod as it is, not a copy of its own, so a node holds one Pod per pod. A
// pod of a node the store does not keep is returned as it is: it is
// dropped.
func (s *SharedPods) storedLocked(key string, pod *corev1.Pod) *corev1.Pod {
	if pod.Spec.NodeName == "" || s.o.Nodes != nil && !s.o.Nodes(pod.Spec.NodeName) {
		return pod
	}
	var seen string
	if old := s.podLocked(key); old != nil && old.UID == pod.UID {
		seen = old.Annotations[podsource.ConfigSeenAnnotation]
	}
	if seen == "" {
		seen = s.o.Clock.Now().Format(time.RFC3339Nano)
	}
	cp := *pod
	cp.ManagedFields = nil
	cp.Annotations = make(map[string]string, len(pod.Annotations)+2)
	for k, v := range pod.Annotations {
		cp.Annotations[k] = v
	}
	cp.Annotations[podsource.ConfigSourceAnnotation] = podsource.APISource
	cp.Annotations[podsource.ConfigSeenAnnotation] = seen
	return &cp
}
