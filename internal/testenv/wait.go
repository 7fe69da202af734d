package testenv

import (
	"fmt"
	"time"
)

// PollTB is the part of testing.TB that Eventually and EventuallyErr use.
type PollTB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Eventually polls cond every interval until it holds, and fails t with
// "<what>: not within <timeout>" when it does not hold within timeout. It is
// for conditions a test cannot be told about (another process's state, a
// goroutine's progress, a fake clock's waiters); fake-clock tests step the
// clock instead of waiting for time to pass, and a test that can be told
// (a channel, a callback) waits on that. Call it from the test's goroutine.
func Eventually(t PollTB, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyErr(t, timeout, interval, what, func() (bool, error) { return cond(), nil })
}

// Receive waits for ch's next value (the zero value once ch is closed) and
// returns it; it fails t with "<what>: not within <timeout>" when none
// comes within timeout. It is the wait for what a test is told on a
// channel. Call it from the test's goroutine.
func Receive[T any](t PollTB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, timeout)
		var zero T
		return zero
	}
}

// EventuallyErr is Eventually for a condition that can say why it does not
// hold yet: the failure ends with the last error cond returned,
// "<what>: not within <timeout> (last error: <err>)".
func EventuallyErr(t PollTB, timeout, interval time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := Poll(timeout, interval, what, cond); err != nil {
		t.Fatalf("%v", err)
	}
}

// Poll is EventuallyErr that returns its failure instead of failing a
// test, for a wait whose running out is a result: it checks cond at once
// and then every interval, and returns nil when it holds, or an error
// naming what, timeout and cond's last error once timeout has passed.
func Poll(timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s: not within %v (last error: %w)", what, timeout, err)
			}
			return fmt.Errorf("%s: not within %v", what, timeout)
		}
		time.Sleep(interval)
	}
}
