package volume

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/internal/listwatch"
)

// ErrNotSynced is wrapped by a read of an object whose watch has not
// listed it yet (and has seen no error): the pod waits and is retried.
var ErrNotSynced = errors.New("object not yet read from the API server")

// kind is a namespaced kind the pods' data comes from.
type kind string

const (
	kindSecret    kind = "secret"
	kindConfigMap kind = "configmap"
)

// resource names the kind in NotFound errors as the kubelet's secret and
// configMap managers do, in the singular: `secret "x" not found`.
func (k kind) resource() schema.GroupResource { return corev1.Resource(string(k)) }

type objectKey struct {
	kind      kind
	namespace string
	name      string
}

func (k objectKey) String() string { return fmt.Sprintf("%s %s/%s", k.kind, k.namespace, k.name) }

// watched is one object's watch: a reflector with a field selector on the
// object's name, shared by every pod that references the object.
type watched struct {
	key     objectKey
	refs    map[types.UID]bool
	cancel  context.CancelFunc
	run     func(context.Context) // the reflector
	started bool

	mu      sync.Mutex
	synced  bool
	obj     runtime.Object // nil: the object does not exist
	err     error          // the last list error, until a list succeeds
	settled chan struct{}  // closed at the first list, successful or not
	once    sync.Once
}

func (w *watched) settle() { w.once.Do(func() { close(w.settled) }) }

// get returns the object, apierrors NotFound, the last list error, or
// ErrNotSynced.
func (w *watched) get() (runtime.Object, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.synced && w.obj != nil:
		return w.obj, nil
	case w.synced:
		return nil, apierrors.NewNotFound(w.key.kind.resource(), w.key.name)
	case w.err != nil:
		return nil, w.err
	}
	return nil, fmt.Errorf("%s: %w", w.key, ErrNotSynced)
}

// objectCache keeps one watch per referenced object, started with the first
// pod that references it and stopped when the last one lets go. changed is
// called (without locks held) with the pods of an object that changed.
type objectCache struct {
	secrets    func(ns string) (listFn, watchFn)
	configMaps func(ns string) (listFn, watchFn)
	changed    func(key objectKey, pods []types.UID)

	mu      sync.Mutex
	ctx     context.Context // the Run context; nil while not running
	objects map[objectKey]*watched
	wg      sync.WaitGroup
}

type (
	listFn  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// acquire makes pod a user of key, starting its watch if it is the first,
// and returns the watch.
func (c *objectCache) acquire(key objectKey, pod types.UID) (*watched, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.objects[key]; w != nil {
		w.refs[pod] = true
		return w, nil
	}
	var l listFn
	var wf watchFn
	switch key.kind {
	case kindSecret:
		l, wf = c.secrets(key.namespace)
	case kindConfigMap:
		l, wf = c.configMaps(key.namespace)
	default:
		return nil, fmt.Errorf("volume: no watch for %s", key)
	}
	w := &watched{key: key, refs: map[types.UID]bool{pod: true}, cancel: func() {}, settled: make(chan struct{})}
	sel := fields.OneTermEqualSelector("metadata.name", key.name).String()
	lw := listwatch.Selected(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		obj, err := l(ctx, o)
		if err != nil {
			w.mu.Lock()
			same := w.err != nil && w.err.Error() == fmt.Sprintf("%s: %v", key, err)
			w.err = fmt.Errorf("%s: %w", key, err)
			w.mu.Unlock()
			w.settle()
			if !same {
				c.notify(w)
			}
		}
		return obj, err
	}, wf, sel)
	var example runtime.Object = &corev1.Secret{}
	if key.kind == kindConfigMap {
		example = &corev1.ConfigMap{}
	}
	r := cache.NewReflectorWithOptions(lw, example, &oneObjectStore{w: w, c: c}, cache.ReflectorOptions{Name: key.String()})
	w.run = r.RunWithContext
	c.objects[key] = w
	if c.ctx != nil {
		c.launchLocked(w)
	}
	return w, nil
}

// launchLocked starts w's reflector under the Run context.
func (c *objectCache) launchLocked(w *watched) {
	ctx, cancel := context.WithCancel(c.ctx)
	w.cancel, w.started = cancel, true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		w.run(ctx)
	}()
}

// release drops pod's use of every object but those in keep; a watch
// without users stops.
func (c *objectCache) release(pod types.UID, keep map[objectKey]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, w := range c.objects {
		if keep[key] || !w.refs[pod] {
			continue
		}
		delete(w.refs, pod)
		if len(w.refs) == 0 {
			w.cancel()
			delete(c.objects, key)
		}
	}
}

// watches is the number of objects watched.
func (c *objectCache) watches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.objects)
}

func (c *objectCache) notify(w *watched) {
	c.mu.Lock()
	pods := make([]types.UID, 0, len(w.refs))
	for uid := range w.refs {
		pods = append(pods, uid)
	}
	c.mu.Unlock()
	if c.changed != nil {
		c.changed(w.key, pods)
	}
}

// start records the Run context and starts the watches acquired before;
// stop cancels every watch, waits for their goroutines and forgets them
// (pods acquire them again at their next set-up).
func (c *objectCache) start(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	for _, w := range c.objects {
		if !w.started {
			c.launchLocked(w)
		}
	}
	c.mu.Unlock()
}

func (c *objectCache) stop() {
	c.mu.Lock()
	for key, w := range c.objects {
		w.cancel()
		delete(c.objects, key)
	}
	c.ctx = nil
	c.mu.Unlock()
	c.wg.Wait()
}

// oneObjectStore is the reflector's store of a single object: it keeps the
// object of the watched name (the fake clientset does not apply field
// selectors, so others are ignored) and tells the cache when it changes.
type oneObjectStore struct {
	w *watched
	c *objectCache
}

func (s *oneObjectStore) set(obj any, deleted bool) {
	o, ok := obj.(runtime.Object)
	if !ok {
		return
	}
	m, err := meta(o)
	if err != nil || m.GetName() != s.w.key.name || m.GetNamespace() != s.w.key.namespace {
		return
	}
	s.w.mu.Lock()
	if deleted {
		s.w.obj = nil
	} else {
		s.w.obj = o
	}
	s.w.mu.Unlock()
	s.c.notify(s.w)
}

func meta(o runtime.Object) (metav1.Object, error) {
	switch v := o.(type) {
	case *corev1.Secret:
		return v, nil
	case *corev1.ConfigMap:
		return v, nil
	}
	return nil, fmt.Errorf("unexpected %T", o)
}

func (s *oneObjectStore) Add(obj any) error    { s.set(obj, false); return nil }
func (s *oneObjectStore) Update(obj any) error { s.set(obj, false); return nil }
func (s *oneObjectStore) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s.set(obj, true)
	return nil
}
func (s *oneObjectStore) Resync() error { return nil }

// Replace is a (re)list: the object is what the list holds of the name.
func (s *oneObjectStore) Replace(items []any, _ string) error {
	var found runtime.Object
	for _, it := range items {
		if o, ok := it.(runtime.Object); ok {
			if m, err := meta(o); err == nil && m.GetName() == s.w.key.name && m.GetNamespace() == s.w.key.namespace {
				found = o
			}
		}
	}
	s.w.mu.Lock()
	s.w.synced, s.w.obj, s.w.err = true, found, nil
	s.w.mu.Unlock()
	s.w.settle()
	s.c.notify(s.w)
	return nil
}
