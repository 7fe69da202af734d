package podsync

import (
	"context"
	"slices"
	"sync"
)

// slots bounds the syncs that run at once (Options.MaxParallel). A freed
// slot goes to the longest-waiting first sync of a pod before any other
// sync: on a full node whose slots are taken by syncs of running pods
// (restarts after failed liveness probes, which a busy runtime makes
// slow), a new pod starts once the next sync ends, not after every sync
// queued before it. The kubelet bounds neither.
type slots struct {
	mu     sync.Mutex
	free   int
	first  []chan struct{} // waiting first syncs, oldest first
	others []chan struct{} // every other waiting sync, oldest first
}

func newSlots(n int) *slots { return &slots{free: n} }

// acquire takes a slot, waiting for one until ctx ends.
func (s *slots) acquire(ctx context.Context, first bool) error {
	s.mu.Lock()
	if s.free > 0 { // nobody waits while a slot is free: release hands it over
		s.free--
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{}, 1)
	if first {
		s.first = append(s.first, ch)
	} else {
		s.others = append(s.others, ch)
	}
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		s.giveUp(ch)
		return ctx.Err()
	}
}

// giveUp takes the waiter ch out of its queue, or, when a slot was handed
// to it as its context ended, passes that slot on.
func (s *slots) giveUp(ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range []*[]chan struct{}{&s.first, &s.others} {
		if i := slices.Index(*q, ch); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
			return
		}
	}
	s.releaseLocked()
}

// release frees a slot taken by acquire.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked()
}

func (s *slots) releaseLocked() {
	for _, q := range []*[]chan struct{}{&s.first, &s.others} {
		if len(*q) > 0 {
			ch := (*q)[0]
			(*q)[0] = nil
			*q = (*q)[1:]
			ch <- struct{}{}
			return
		}
	}
	s.free++
}

// available is how many slots a sync asking now would find free.
func (s *slots) available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}
