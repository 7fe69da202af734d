package nodekit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Runnable is one long-running part of an agent: Run blocks until ctx ends
// (it then returns nil) or the part fails (it returns the error).
type Runnable interface {
	Run(ctx context.Context) error
}

// RunnableFunc adapts a function to Runnable.
type RunnableFunc func(ctx context.Context) error

// Run calls f.
func (f RunnableFunc) Run(ctx context.Context) error { return f(ctx) }

var _ Runnable = RunnableFunc(nil)

// ErrStoppedUnexpectedly is wrapped by the error of a runnable that
// returned nil while its group was still running: every part of an agent
// is meant to run until the agent stops.
var ErrStoppedUnexpectedly = errors.New("stopped unexpectedly")

// Group runs runnables together, as controller-runtime's manager runs its
// runnables: Run starts them in the order they were added, and when ctx
// ends or one of them fails it stops them in the reverse order, each one
// only after those added after it have returned, so that a part never
// outlives what it feeds on. The first failure is returned, wrapped with
// the runnable's name; nothing is left running when Run returns.
//
// The zero Group is empty and ready to use. Add must not be called once
// Run has started.
type Group struct {
	mu      sync.Mutex
	entries []groupEntry
	started bool
}

type groupEntry struct {
	name string
	r    Runnable
}

// Add appends r under name (used in errors and logs). It returns an error
// when the group is already running or r is nil.
func (g *Group) Add(name string, r Runnable) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.started:
		return fmt.Errorf("nodekit: Group.Add(%q) after Run", name)
	case r == nil:
		return fmt.Errorf("nodekit: Group.Add(%q): nil runnable", name)
	}
	g.entries = append(g.entries, groupEntry{name: name, r: r})
	return nil
}

// AddGroup appends every runnable of o, in o's order, prefixing their
// names with prefix and ": ".
func (g *Group) AddGroup(prefix string, o *Group) error {
	o.mu.Lock()
	entries := append([]groupEntry(nil), o.entries...)
	o.mu.Unlock()
	for _, e := range entries {
		if err := g.Add(prefix+": "+e.name, e.r); err != nil {
			return err
		}
	}
	return nil
}

// Names returns the runnables' names in start order.
func (g *Group) Names() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	names := make([]string, len(g.entries))
	for i, e := range g.entries {
		names[i] = e.name
	}
	return names
}

// Run runs every runnable until ctx ends or one of them returns; it then
// stops the others in reverse order and waits for each. It returns nil
// after a plain stop, else the first failure (a runnable that returned nil
// while the group ran failed with ErrStoppedUnexpectedly). Run may be
// called once.
func (g *Group) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		return errors.New("nodekit: Group.Run called twice")
	}
	g.started = true
	entries := g.entries
	g.mu.Unlock()

	type done struct {
		i   int
		err error
	}
	stopping := make(chan struct{})
	results := make(chan done, len(entries))
	cancels := make([]context.CancelFunc, len(entries))
	finished := make([]chan struct{}, len(entries))
	for i, e := range entries {
		// Each runnable's context ends only when Run stops it, so that the
		// stop goes in reverse order even when ctx itself ends.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		cancels[i], finished[i] = cancel, make(chan struct{})
		go func() {
			defer close(finished[i])
			err := e.r.Run(rctx)
			select {
			case <-stopping:
				return // stopping: whatever it returned is the stop
			default:
			}
			if err == nil {
				err = ErrStoppedUnexpectedly
			}
			results <- done{i, fmt.Errorf("%s: %w", e.name, err)}
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case d := <-results:
		first = d.err
	}
	close(stopping)
	for i := len(entries) - 1; i >= 0; i-- {
		cancels[i]()
		<-finished[i]
	}
	return first
}
