// Package loop is the one timer loop under every component's Run: it calls
// the component's synchronous step, waits on the injected clock for as long
// as the step asks (or until something wakes it), and does it again until
// the context ends.
//
// A step returns how long to wait before the next call, measured from the
// clock's now when it returns; Never (any negative wait) says that nothing
// is scheduled, so only a wake or the context's end ends the wait. A wait
// of 0 calls the step again at once.
//
// Run handles, once for every loop, a clock that moves while the step runs
// or before the timer is armed (a fake clock stepped by a test at that
// moment). A step that took longer than a millisecond may have measured its
// wait from any instant within it, so the wait is measured from its start:
// the step may be called a little early (it then asks for what is left),
// never late. A timer armed after its deadline has passed would wait a
// whole wait too long, so Run calls the step at once instead.
package loop

import (
	"context"
	"reflect"
	"time"

	"k8s.io/utils/clock"
)

// Never is the wait a step returns when nothing is scheduled: the loop
// waits for a wake, or for its context to end. Every negative wait means
// the same.
const Never time.Duration = -1

// slowStep is how long a step may take before its wait is measured from its
// start rather than its return.
const slowStep = time.Millisecond

// Step is a component's synchronous step: it does what is due and returns
// how long to wait before it is called again (Never: nothing is scheduled).
// An error stops the loop; a step whose failures are retried logs them and
// returns nil.
type Step func(ctx context.Context) (time.Duration, error)

// A Wake ends a wait before its timer: a signal (Signal) or a value to
// handle on the loop's goroutine before the next step (On).
type Wake struct {
	ch     reflect.Value
	handle func(v reflect.Value, ok bool)
}

// Signal wakes the loop whenever ch delivers (a closed ch is dropped).
func Signal[T any](ch <-chan T) Wake {
	return Wake{ch: reflect.ValueOf(ch)}
}

// On hands each value ch delivers to fn, on the loop's goroutine, and then
// calls the step. A closed ch is dropped: it wakes the loop no more.
func On[T any](ch <-chan T, fn func(T)) Wake {
	return Wake{ch: reflect.ValueOf(ch), handle: func(v reflect.Value, ok bool) {
		if ok {
			fn(v.Interface().(T))
		}
	}}
}

// Run calls step until ctx ends, waiting on clk between calls for as long as
// each call asks or until one of wakes delivers. It returns nil when ctx
// ends (also when the step's error came from ctx ending) and the step's
// error otherwise.
func Run(ctx context.Context, clk clock.Clock, step Step, wakes ...Wake) error {
	w := newWaiter(ctx, wakes)
	for {
		before := clk.Now()
		d, err := step(ctx)
		from := clk.Now()
		if from.Sub(before) > slowStep {
			from = before
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !w.wait(clk, from, d) {
			return nil
		}
	}
}

// Sleep waits d on clk; it returns false when ctx ended first. A wait of 0
// or less returns at once (true unless ctx has ended).
func Sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// Wait is Run's wait between two steps, for a loop that cannot hand its
// whole body to Run: it waits d (Never: no timer) on clk from the clock's
// reading from, the one d was worked out from, so that a clock moved since
// (a stepped fake one) shortens the wait as Run's does, until the timer
// fires or one of wakes delivers (true) or ctx ends (false).
func Wait(ctx context.Context, clk clock.Clock, from time.Time, d time.Duration, wakes ...Wake) bool {
	return newWaiter(ctx, wakes).wait(clk, from, d)
}

// The cases of a waiter: ctx, the timer, then the wakes.
const (
	caseDone = iota
	caseTimer
	caseWakes
)

type waiter struct {
	ctx   context.Context
	cases []reflect.SelectCase
	wakes []Wake
}

func newWaiter(ctx context.Context, wakes []Wake) *waiter {
	w := &waiter{ctx: ctx, cases: make([]reflect.SelectCase, caseWakes, caseWakes+len(wakes)), wakes: wakes}
	w.cases[caseDone] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	w.cases[caseTimer] = reflect.SelectCase{Dir: reflect.SelectRecv}
	for _, wk := range wakes {
		w.cases = append(w.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: wk.ch})
	}
	return w
}

// due is always ready: the timer's case when the deadline has passed.
var due = func() reflect.Value {
	c := make(chan time.Time)
	close(c)
	return reflect.ValueOf((<-chan time.Time)(c))
}()

// wait waits d from the clock's reading from.
func (w *waiter) wait(clk clock.Clock, from time.Time, d time.Duration) bool {
	if w.ctx.Err() != nil {
		return false
	}
	w.cases[caseTimer].Chan = reflect.Value{}
	switch {
	case d == 0:
		w.cases[caseTimer].Chan = due
	case d > 0:
		deadline := from.Add(d)
		t := clk.NewTimer(max(deadline.Sub(clk.Now()), 0))
		defer t.Stop()
		w.cases[caseTimer].Chan = reflect.ValueOf(t.C())
		if !clk.Now().Before(deadline) {
			// Due already, or the clock (a stepped fake one) reached the
			// deadline between the step's return and the arming of the
			// timer, which then waits too long.
			w.cases[caseTimer].Chan = due
		}
	}
	for {
		i, v, ok := reflect.Select(w.cases)
		switch i {
		case caseDone:
			return false
		case caseTimer:
			return true
		}
		wk := w.wakes[i-caseWakes]
		if !ok {
			w.cases[i].Chan = reflect.Value{} // closed: never again
			if wk.handle == nil {
				continue
			}
		}
		if wk.handle != nil {
			wk.handle(v, ok)
			if !ok {
				continue
			}
		}
		return true
	}
}
