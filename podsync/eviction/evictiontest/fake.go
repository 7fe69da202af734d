package evictiontest

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsync/eviction"
)

// Observer is an eviction.Observer that returns the snapshot last set.
type Observer struct {
	mu    sync.Mutex
	snap  eviction.Snapshot
	errs  []error
	calls int
}

var _ eviction.Observer = (*Observer)(nil)

// NewObserver returns an Observer that reports s.
func NewObserver(s eviction.Snapshot) *Observer { return &Observer{snap: clone(s)} }

// Set replaces the snapshot.
func (o *Observer) Set(s eviction.Snapshot) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.snap = clone(s)
}

// Update changes the snapshot in place under the Observer's lock.
func (o *Observer) Update(f func(s *eviction.Snapshot)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f(&o.snap)
}

// Snapshot returns a copy of the snapshot.
func (o *Observer) Snapshot() eviction.Snapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	return clone(o.snap)
}

// FailNext makes the next Observe calls return errs, one each, in order.
func (o *Observer) FailNext(errs ...error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, errs...)
}

// Calls returns how many times Observe was called.
func (o *Observer) Calls() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls
}

// Observe returns a copy of the snapshot, or the next error queued.
func (o *Observer) Observe(context.Context) (*eviction.Snapshot, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	if len(o.errs) > 0 {
		err := o.errs[0]
		o.errs = o.errs[1:]
		return nil, err
	}
	s := clone(o.snap)
	return &s, nil
}

func clone(s eviction.Snapshot) eviction.Snapshot {
	if s.Memory != nil {
		m := *s.Memory
		s.Memory = &m
	}
	if s.AllocatableMemory != nil {
		m := *s.AllocatableMemory
		s.AllocatableMemory = &m
	}
	if s.NodeFS != nil {
		f := *s.NodeFS
		s.NodeFS = &f
	}
	if s.ImageFS != nil {
		f := *s.ImageFS
		s.ImageFS = &f
	}
	if s.PIDs != nil {
		p := *s.PIDs
		s.PIDs = &p
	}
	s.Pods = slices.Clone(s.Pods)
	for i := range s.Pods {
		s.Pods[i].Containers = slices.Clone(s.Pods[i].Containers)
	}
	return s
}

// Eviction is one call of Killer.Evict.
type Eviction struct {
	Pod         *corev1.Pod
	Status      corev1.PodStatus
	GracePeriod int64
}

// Killer is an eviction.Killer that records what it is asked to evict.
type Killer struct {
	mu        sync.Mutex
	evictions []Eviction
	errs      []error
	// OnEvict, when set before use, runs on every call (after it is
	// recorded), outside the Killer's lock: to free the pod's usage in an
	// Observer, say.
	OnEvict func(e Eviction)
}

var _ eviction.Killer = (*Killer)(nil)

// Evict records the call and returns the next error queued by FailNext.
func (k *Killer) Evict(_ context.Context, pod *corev1.Pod, status corev1.PodStatus, gracePeriod int64) error {
	e := Eviction{Pod: pod, Status: *status.DeepCopy(), GracePeriod: gracePeriod}
	k.mu.Lock()
	k.evictions = append(k.evictions, e)
	var err error
	if len(k.errs) > 0 {
		err, k.errs = k.errs[0], k.errs[1:]
	}
	hook := k.OnEvict
	k.mu.Unlock()
	if hook != nil {
		hook(e)
	}
	return err
}

// FailNext makes the next Evict calls return errs, one each, in order.
func (k *Killer) FailNext(errs ...error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, errs...)
}

// Evictions returns the calls so far, oldest first.
func (k *Killer) Evictions() []Eviction {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.evictions)
}

// Reclaimer is an eviction.Reclaimer that records the signals it is
// called for and runs Func, when set, to decide what it frees.
type Reclaimer struct {
	mu    sync.Mutex
	calls []eviction.Signal
	// Func, when set before use, is what Reclaim does; nil frees nothing.
	Func func(ctx context.Context, signal eviction.Signal) (uint64, error)
}

var _ eviction.Reclaimer = (*Reclaimer)(nil)

// Reclaim records the call and runs Func.
func (r *Reclaimer) Reclaim(ctx context.Context, signal eviction.Signal) (uint64, error) {
	r.mu.Lock()
	r.calls = append(r.calls, signal)
	r.mu.Unlock()
	if r.Func == nil {
		return 0, nil
	}
	return r.Func(ctx, signal)
}

// Calls returns the signals Reclaim was called for, oldest first.
func (r *Reclaimer) Calls() []eviction.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}
