package podsync

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
)

func (s *slots) queued() (first, others int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.first), len(s.others)
}

// A freed slot goes to the oldest waiting first sync, then to the oldest
// other; a waiter whose context ends leaves the queue, and a slot handed
// to it as it ended is passed on.
func TestSlotsFirstSyncsGoFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	s := newSlots(1)
	if err := s.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := s.available(); n != 0 {
		t.Fatalf("available with the only slot taken = %d", n)
	}
	var mu sync.Mutex
	var order []string
	wait := func(name string, first bool, f, o int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.acquire(ctx, first); err != nil {
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			s.release()
		}()
		testenv.Eventually(t, 10*time.Second, time.Millisecond, name+" queued", func() bool {
			gf, go_ := s.queued()
			return gf == f && go_ == o
		})
	}
	wait("resync-1", false, 0, 1)
	wait("resync-2", false, 0, 2)
	wait("first-1", true, 1, 2)
	wait("first-2", true, 2, 2)

	// A waiter that gives up leaves its place.
	cctx, cancelWaiter := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- s.acquire(cctx, true) }()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the third first sync queued", func() bool {
		f, _ := s.queued()
		return f == 3
	})
	cancelWaiter()
	if err := <-gaveUp; err == nil {
		t.Fatal("acquire with its context ended took a slot")
	}
	if f, o := s.queued(); f != 2 || o != 2 {
		t.Fatalf("queued after a waiter gave up: %d first, %d others; want 2, 2", f, o)
	}

	s.release()
	wg.Wait()
	if want := []string{"first-1", "first-2", "resync-1", "resync-2"}; !slices.Equal(order, want) {
		t.Errorf("slots taken in order %v, want %v", order, want)
	}
	if n := s.available(); n != 1 {
		t.Errorf("available once all released = %d, want 1", n)
	}

	// A slot handed over as the waiter's context ends is not lost.
	if err := s.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.others = append(s.others, ch) // as acquire queues a waiter
	s.mu.Unlock()
	s.release() // handed to ch; its acquire's context ends now
	if f, o := s.queued(); f != 0 || o != 0 {
		t.Fatalf("queued after the hand-over: %d first, %d others", f, o)
	}
	s.giveUp(ch) // acquire's path when its context ends
	if n := s.available(); n != 1 {
		t.Errorf("available after a handed-over slot was passed on = %d, want 1", n)
	}
}

// On a full node whose only slot a long sync of a running pod holds, with a
// resync of another running pod queued, a new pod's first sync takes the
// slot when it frees, before the resync queued earlier.
func TestEngineNewPodSyncsBeforeQueuedResyncs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	clock := clocktesting.NewFakeClock(t0)
	var mu sync.Mutex
	var order []types.UID
	var gate chan struct{}
	entered := make(chan struct{}, 1)
	syncer := SyncerFuncs{Sync: func(ctx context.Context, pod *corev1.Pod, _ *PodState) (SyncResult, error) {
		mu.Lock()
		order = append(order, pod.UID)
		g := gate
		mu.Unlock()
		if g != nil && pod.UID == "old-a" {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-g:
			case <-ctx.Done():
			}
		}
		return SyncResult{}, nil
	}}
	relister := relisterFunc(func(context.Context) (map[types.UID]*PodState, error) { return nil, nil })
	eng, err := New(Options{Syncer: syncer, Relister: relister, Clock: clock, MaxParallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	}
	eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{pod("old-a"), pod("old-b")}})
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	gate, order = make(chan struct{}), nil
	mu.Unlock()
	eng.Trigger("old-a")
	if _, err := eng.step(ctx, &wg, false); err != nil {
		t.Fatal(err)
	}
	<-entered // old-a holds the only slot
	eng.Trigger("old-b")
	if _, err := eng.step(ctx, &wg, false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "old-b's resync queued", func() bool {
		_, o := eng.slots.queued()
		return o == 1
	})
	eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{pod("new")}})
	if _, err := eng.step(ctx, &wg, false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the new pod's first sync queued", func() bool {
		f, _ := eng.slots.queued()
		return f == 1
	})
	close(gate)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if want := []types.UID{"old-a", "new", "old-b"}; !slices.Equal(order, want) {
		t.Errorf("syncs in order %v, want %v", order, want)
	}
}
