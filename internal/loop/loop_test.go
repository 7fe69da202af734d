package loop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// calls is a step that counts its calls, reports each on a channel and
// asks for the wait next held when the call began (read before the report,
// so that a test that changes next after reading call n changes what call
// n+1 asks, never what call n asks).
type calls struct {
	n    atomic.Int32
	next atomic.Int64
	ch   chan int
}

func newCalls(d time.Duration) *calls {
	c := &calls{ch: make(chan int, 100)}
	c.next.Store(int64(d))
	return c
}

func (c *calls) step(ctx context.Context) (time.Duration, error) {
	d := time.Duration(c.next.Load())
	select {
	case c.ch <- int(c.n.Add(1)):
	case <-ctx.Done():
	}
	return d, nil
}

func (c *calls) want(t *testing.T, n int) {
	t.Helper()
	select {
	case got := <-c.ch:
		if got != n {
			t.Fatalf("call %d, want %d", got, n)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no call %d", n)
	}
}

func (c *calls) none(t *testing.T) {
	t.Helper()
	select {
	case got := <-c.ch:
		t.Fatalf("unexpected call %d", got)
	case <-time.After(20 * time.Millisecond):
	}
}

func start(t *testing.T, clk clock.Clock, step Step, wakes ...Wake) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, clk, step, wakes...) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return")
			return nil
		}
	}
}

func waitTimer(t *testing.T, fc *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("no timer armed")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRunWaitsTheStepsWait(t *testing.T) {
	defer leakcheck.Check(t)()
	fc := testingclock.NewFakeClock(t0)
	c := newCalls(time.Second)
	stop := start(t, fc, c.step)
	c.want(t, 1)
	waitTimer(t, fc)
	fc.Step(999 * time.Millisecond)
	c.none(t)
	fc.Step(time.Millisecond)
	c.want(t, 2)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestRunZeroWaitStepsAgain(t *testing.T) {
	defer leakcheck.Check(t)()
	fc := testingclock.NewFakeClock(t0)
	c := newCalls(0)
	stop := start(t, fc, c.step)
	c.want(t, 1)
	c.want(t, 2)
	c.next.Store(int64(Never))
	c.want(t, 3)
	_ = stop()
}

func TestRunNeverWaitsForAWake(t *testing.T) {
	defer leakcheck.Check(t)()
	fc := testingclock.NewFakeClock(t0)
	c := newCalls(Never)
	wake := make(chan struct{}, 1)
	stop := start(t, fc, c.step, Signal(wake))
	c.want(t, 1)
	fc.Step(time.Hour)
	c.none(t)
	if fc.HasWaiters() {
		t.Error("a timer is armed with nothing scheduled")
	}
	wake <- struct{}{}
	c.want(t, 2)
	close(wake) // a closed wake is dropped, not a busy loop
	c.none(t)
	_ = stop()
}

func TestRunHandsValuesBeforeTheStep(t *testing.T) {
	defer leakcheck.Check(t)()
	fc := testingclock.NewFakeClock(t0)
	var got atomic.Int32
	ch := make(chan int)
	seen := make(chan int32, 10)
	step := func(context.Context) (time.Duration, error) {
		seen <- got.Load()
		return Never, nil
	}
	stop := start(t, fc, step, On(ch, func(v int) { got.Add(int32(v)) }))
	if v := <-seen; v != 0 {
		t.Fatalf("first step saw %d", v)
	}
	ch <- 5
	if v := <-seen; v != 5 {
		t.Fatalf("step after the value saw %d, want 5", v)
	}
	close(ch)
	select {
	case v := <-seen:
		t.Fatalf("a closed channel called the step (%d)", v)
	case <-time.After(20 * time.Millisecond):
	}
	_ = stop()
}

func TestRunStepError(t *testing.T) {
	defer leakcheck.Check(t)()
	boom := errors.New("boom")
	err := Run(context.Background(), testingclock.NewFakeClock(t0), func(context.Context) (time.Duration, error) {
		return 0, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want boom", err)
	}
	// An error because ctx ended is not a failure.
	ctx, cancel := context.WithCancel(context.Background())
	err = Run(ctx, testingclock.NewFakeClock(t0), func(ctx context.Context) (time.Duration, error) {
		cancel()
		return 0, ctx.Err()
	})
	if err != nil {
		t.Fatalf("Run after ctx ended = %v, want nil", err)
	}
}

// steppingClock steps its fake clock by by just before arming a timer, as a
// test stepping the clock between the step's return and the timer does.
type steppingClock struct {
	*testingclock.FakeClock
	by atomic.Int64
}

func (c *steppingClock) NewTimer(d time.Duration) clock.Timer {
	if by := time.Duration(c.by.Swap(0)); by > 0 {
		c.Step(by)
	}
	return c.FakeClock.NewTimer(d)
}

func TestRunClockSteppedBeforeTheTimerIsArmed(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, by := range []time.Duration{time.Second, time.Minute} {
		clk := &steppingClock{FakeClock: testingclock.NewFakeClock(t0)}
		clk.by.Store(int64(by))
		c := newCalls(time.Second)
		stop := start(t, clk, c.step)
		c.want(t, 1)
		// The clock reached the deadline while the timer was armed: the
		// step runs again without another step of the clock.
		c.want(t, 2)
		_ = stop()
	}
}

// A step that reads the clock, sees it stepped (by a test) before it
// returns, and asks for the wait left from its read: the step is called
// again when that wait has passed, not a whole wait later.
func TestRunClockSteppedDuringTheStep(t *testing.T) {
	defer leakcheck.Check(t)()
	fc := testingclock.NewFakeClock(t0)
	calls := make(chan time.Time, 10)
	var n atomic.Int32
	stop := start(t, fc, func(ctx context.Context) (time.Duration, error) {
		now := fc.Now()
		calls <- now
		if n.Add(1) == 1 {
			fc.Step(time.Second) // the test moves the clock under the step
		}
		return time.Second - now.Sub(now.Truncate(time.Second)), nil
	})
	for i, want := range []time.Time{t0, t0.Add(time.Second)} {
		select {
		case got := <-calls:
			if !got.Equal(want) {
				t.Fatalf("call %d at %v, want %v", i+1, got.Sub(t0), want.Sub(t0))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no call %d: the wait was measured from the step's return", i+1)
		}
	}
	_ = stop()
}

// Wait and Sleep, each as a func(ctx, clk, d).
var waits = map[string]func(context.Context, clock.Clock, time.Duration) bool{
	"Wait":  func(ctx context.Context, clk clock.Clock, d time.Duration) bool { return Wait(ctx, clk, clk.Now(), d) },
	"Sleep": Sleep,
}

func TestWaitAndSleep(t *testing.T) {
	for name, wait := range waits {
		t.Run(name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			fc := testingclock.NewFakeClock(t0)
			ctx, cancel := context.WithCancel(context.Background())
			if !wait(ctx, fc, 0) {
				t.Fatal("a wait of 0 = false")
			}
			done := make(chan bool)
			go func() { done <- wait(ctx, fc, time.Second) }()
			waitTimer(t, fc)
			fc.Step(time.Second)
			if !<-done {
				t.Fatal("false after the timer")
			}
			go func() { done <- wait(ctx, fc, time.Hour) }()
			waitTimer(t, fc)
			cancel()
			if <-done {
				t.Fatal("true after ctx ended")
			}
			if wait(ctx, fc, 0) {
				t.Fatal("a wait of 0 = true after ctx ended")
			}
			if fc.HasWaiters() {
				t.Error("a timer left armed")
			}
		})
	}
	// Sleep of a negative time returns at once; Wait(Never) waits for ctx.
	ctx, cancel := context.WithCancel(context.Background())
	fc := testingclock.NewFakeClock(t0)
	if !Sleep(ctx, fc, -time.Second) {
		t.Fatal("Sleep(-1s) = false")
	}
	done := make(chan bool)
	go func() { done <- Wait(ctx, fc, fc.Now(), Never) }()
	cancel()
	if <-done {
		t.Fatal("Wait(Never) = true after ctx ended")
	}
}

// A wait worked out from an earlier reading of the clock ends at that
// reading plus the wait: a clock stepped past it in between makes it due at
// once, and one stepped part of the way shortens it.
func TestWaitFromAnEarlierReading(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx := context.Background()
	fc := testingclock.NewFakeClock(t0)
	from := fc.Now()
	fc.Step(time.Second)
	if !Wait(ctx, fc, from, time.Second) {
		t.Fatal("a wait already over = false")
	}
	from = fc.Now()
	fc.Step(time.Second)
	done := make(chan bool)
	go func() { done <- Wait(ctx, fc, from, 3*time.Second) }()
	waitTimer(t, fc)
	fc.Step(2 * time.Second) // from + 3s
	if !<-done {
		t.Fatal("false after the timer")
	}
}
