package runtimeclass

import (
	"context"
	"fmt"
	"sync"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/internal/listwatch"
	"github.com/nodekit/nodekit/podsync"
)

// Client is what the Manager uses of the RuntimeClasses' client:
// client-go's typed client (NodeV1().RuntimeClasses()) or
// nodekit.Client.RuntimeClasses.
type Client interface {
	List(ctx context.Context, opts metav1.ListOptions) (*nodev1.RuntimeClassList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Options configure New. The zero value is a Manager without an API
// server.
type Options struct {
	// Client lists and watches the RuntimeClasses. Default nil: no API
	// server; every class is not found.
	Client Client
}

// Manager keeps the RuntimeClasses as one list-and-watch, and resolves a
// pod's runtimeClassName to its runtime handler (a podsync.RuntimeClasses).
type Manager struct {
	reflector *cache.Reflector // nil without a client
	store     cache.Store

	mu      sync.Mutex
	synced  bool          // a list has been stored
	err     error         // the last list error, until a list succeeds
	settled chan struct{} // closed at the first list, successful or not
	once    sync.Once
}

var _ podsync.RuntimeClasses = (*Manager)(nil)

// New returns a Manager; it makes no request until Run.
func New(o Options) (*Manager, error) {
	m := &Manager{store: cache.NewStore(cache.MetaNamespaceKeyFunc), settled: make(chan struct{})}
	if o.Client == nil {
		return m, nil
	}
	c := o.Client
	lw := listwatch.Selected(func(ctx context.Context, opts metav1.ListOptions) (*nodev1.RuntimeClassList, error) {
		l, err := c.List(ctx, opts)
		if err != nil {
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			m.settle()
		}
		return l, err
	}, c.Watch, "")
	m.reflector = cache.NewReflectorWithOptions(lw, &nodev1.RuntimeClass{}, &syncedStore{Store: m.store, m: m},
		cache.ReflectorOptions{Name: "runtimeclasses"})
	return m, nil
}

func (m *Manager) settle() { m.once.Do(func() { close(m.settled) }) }

// syncedStore marks the manager synced at every list.
type syncedStore struct {
	cache.Store
	m *Manager
}

func (s *syncedStore) Replace(items []any, rv string) error {
	err := s.Store.Replace(items, rv)
	s.m.mu.Lock()
	s.m.synced, s.m.err = true, nil
	s.m.mu.Unlock()
	s.m.settle()
	return err
}

// Run lists and watches the RuntimeClasses until ctx ends; without a
// client it only waits for ctx. It returns nil.
func (m *Manager) Run(ctx context.Context) error {
	if m.reflector == nil {
		<-ctx.Done()
		return nil
	}
	m.reflector.RunWithContext(ctx)
	return nil
}

// HasSynced reports whether the RuntimeClasses were listed once.
func (m *Manager) HasSynced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.synced
}

// LookupRuntimeHandler returns the handler of the RuntimeClass called
// *runtimeClassName: "" (the runtime's default) for nil or "", an error
// that apierrors.IsNotFound for a class that does not exist (the
// kubelet's `runtimeclass.node.k8s.io "x" not found`, also every class of
// a Manager without a client), and the kubelet's "failed to lookup
// RuntimeClass" error while the list fails. Before the first list (Run
// must be running) it waits for it, or for ctx, so that a pod is not
// failed for a class merely not read yet.
func (m *Manager) LookupRuntimeHandler(ctx context.Context, runtimeClassName *string) (string, error) {
	if runtimeClassName == nil || *runtimeClassName == "" {
		return "", nil
	}
	name := *runtimeClassName
	if m.reflector == nil {
		return "", NotFound(name)
	}
	select {
	case <-m.settled:
	case <-ctx.Done():
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, ctx.Err())
	}
	m.mu.Lock()
	synced, lerr := m.synced, m.err
	m.mu.Unlock()
	if !synced && lerr != nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, lerr)
	}
	obj, ok, err := m.store.GetByKey(name)
	if err != nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, err)
	}
	if !ok {
		return "", NotFound(name)
	}
	return obj.(*nodev1.RuntimeClass).Handler, nil
}

// NotFound is the kubelet's error for a RuntimeClass that does not exist:
// `runtimeclass.node.k8s.io "name" not found`, apierrors.IsNotFound.
func NotFound(name string) error {
	return apierrors.NewNotFound(nodev1.Resource("runtimeclass"), name)
}
