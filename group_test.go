package nodekit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

// recorder notes the order in which runnables start and stop.
type orderLog struct {
	mu     sync.Mutex
	events []string
}

func (l *orderLog) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (l *orderLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// blocker starts, signals started, runs until ctx ends and records its stop.
func blocker(l *orderLog, name string, started *sync.WaitGroup) Runnable {
	started.Add(1)
	return RunnableFunc(func(ctx context.Context) error {
		l.add("start " + name)
		started.Done()
		<-ctx.Done()
		l.add("stop " + name)
		return nil
	})
}

func TestGroupStopsInReverseOrder(t *testing.T) {
	defer leakcheck.Check(t)()
	var l orderLog
	var started sync.WaitGroup
	var g Group
	for _, n := range []string{"a", "b", "c"} {
		if err := g.Add(n, blocker(&l, n, &started)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx) }()
	started.Wait()
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run after a plain stop: %v", err)
	}
	got := l.get()
	if want := []string{"stop c", "stop b", "stop a"}; !slices.Equal(got[3:], want) {
		t.Errorf("stop order %v, want %v", got[3:], want)
	}
	if err := g.Add("late", RunnableFunc(func(context.Context) error { return nil })); err == nil {
		t.Error("Add after Run: no error")
	}
	if err := g.Run(context.Background()); err == nil {
		t.Error("second Run: no error")
	}
}

func TestGroupFirstFailureStopsTheRest(t *testing.T) {
	defer leakcheck.Check(t)()
	var l orderLog
	var started sync.WaitGroup
	boom := errors.New("boom")
	var g Group
	_ = g.Add("a", blocker(&l, "a", &started))
	_ = g.Add("b", blocker(&l, "b", &started))
	started.Add(1)
	_ = g.Add("fails", RunnableFunc(func(ctx context.Context) error {
		started.Done()
		started.Wait() // every other part is running
		return boom
	}))
	err := g.Run(context.Background())
	if !errors.Is(err, boom) || err.Error() != "fails: boom" {
		t.Fatalf("Run = %v, want fails: boom", err)
	}
	got := l.get()
	if want := []string{"stop b", "stop a"}; !slices.Equal(got[len(got)-2:], want) {
		t.Errorf("events %v: want the others stopped in reverse order", got)
	}
}

func TestGroupNilReturnIsUnexpected(t *testing.T) {
	defer leakcheck.Check(t)()
	var g Group
	_ = g.Add("quits", RunnableFunc(func(context.Context) error { return nil }))
	err := g.Run(context.Background())
	if !errors.Is(err, ErrStoppedUnexpectedly) || err.Error() != "quits: stopped unexpectedly" {
		t.Fatalf("Run = %v", err)
	}
	if err := g.Add("nil", nil); err == nil {
		t.Error("Add(nil): no error")
	}
}

func TestGroupAddGroup(t *testing.T) {
	var inner, outer Group
	for i := range 2 {
		_ = inner.Add(fmt.Sprint("part", i), RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }))
	}
	_ = outer.Add("first", RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }))
	if err := outer.AddGroup("pods", &inner); err != nil {
		t.Fatal(err)
	}
	if got, want := outer.Names(), []string{"first", "pods: part0", "pods: part1"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
}
