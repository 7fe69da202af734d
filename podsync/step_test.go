package podsync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// eventedRelister counts full relists, per-pod relists and health checks,
// and streams the events sent on events.
type eventedRelister struct {
	mu                    sync.Mutex
	relists, pods, checks int
	checkErr              error
	events                chan PodEvent
	handled, opened       chan struct{}
}

func (r *eventedRelister) Relist(context.Context) (map[types.UID]*PodState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.relists++
	return nil, nil
}

func (r *eventedRelister) RelistPod(context.Context, types.UID) (*PodState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods++
	return nil, nil
}

func (r *eventedRelister) CheckHealth(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks++
	return r.checkErr
}

func (r *eventedRelister) WatchEvents(ctx context.Context, fn func(PodEvent)) error {
	r.opened <- struct{}{}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-r.events:
			fn(ev)
			r.handled <- struct{}{}
		}
	}
}

func (r *eventedRelister) counts() (relists, pods, checks int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.relists, r.pods, r.checks
}

// The engine's step alone does what a turn of Run does: with the event
// stream that Run would open, SyncOnce relists the one pod an event names,
// relists in full only when that is due (slower while events flow), checks
// the backend's health between relists and relists at once when the check
// fails, and relists in full when more pods wait than a step relists alone.
func TestSyncOnceRelistsPodsAndChecksHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clock := clocktesting.NewFakeClock(t0)
	r := &eventedRelister{events: make(chan PodEvent), handled: make(chan struct{}), opened: make(chan struct{}, 1)}
	eng, err := New(Options{Syncer: SyncerFuncs{}, Relister: r, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); eng.watchEvents(ctx, r) }() // as Run starts it
	defer func() { cancel(); wg.Wait() }()
	<-r.opened

	want := func(what string, relists, pods, checks int) {
		t.Helper()
		if _, err := eng.SyncOnce(ctx); err != nil {
			t.Fatalf("%s: SyncOnce: %v", what, err)
		}
		if a, b, c := r.counts(); a != relists || b != pods || c != checks {
			t.Fatalf("%s: relists %d, pod relists %d, checks %d; want %d, %d, %d", what, a, b, c, relists, pods, checks)
		}
	}
	want("first step", 1, 0, 0)
	want("nothing due", 1, 0, 0)
	r.events <- PodEvent{UID: "uid-1"}
	<-r.handled
	want("an event", 1, 1, 0)
	clock.Step(DefaultRelistPeriod)
	want("relist due", 2, 1, 0) // events flowed: the next relist is EventedRelistPeriod away
	clock.Step(DefaultRelistPeriod)
	want("health check due", 2, 1, 1)
	want("nothing due again", 2, 1, 1)
	r.mu.Lock()
	r.checkErr = errors.New("runtime down")
	r.mu.Unlock()
	clock.Step(DefaultRelistPeriod)
	want("failed check", 2, 1, 2)
	want("relist after the failed check", 3, 1, 2)
	for i := range maxPodRelists {
		r.events <- PodEvent{UID: types.UID(fmt.Sprintf("uid-%d", i))}
		<-r.handled
	}
	want("as many events as a step relists alone", 3, 1+maxPodRelists, 2)
	for i := range maxPodRelists + 1 {
		r.events <- PodEvent{UID: types.UID(fmt.Sprintf("uid-%d", i))}
		<-r.handled
	}
	want("more events than a step relists alone", 4, 1+maxPodRelists, 2)
}
