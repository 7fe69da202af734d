package testenv

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// fatalRecorder is a PollTB that records the failure instead of ending the
// test.
type fatalRecorder struct{ msg string }

func (*fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	n := 0
	var r fatalRecorder
	Eventually(&r, 10*time.Second, time.Millisecond, "three looks", func() bool { n++; return n == 3 })
	if r.msg != "" || n != 3 {
		t.Errorf("holding at the third look: %d looks, failure %q", n, r.msg)
	}
	Eventually(&r, 5*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	if r.msg != "never: not within 5ms" {
		t.Errorf("failure %q", r.msg)
	}
}

func TestEventuallyErr(t *testing.T) {
	var r fatalRecorder
	EventuallyErr(&r, 5*time.Millisecond, time.Millisecond, "the socket", func() (bool, error) { return false, errors.New("refused") })
	if r.msg != "the socket: not within 5ms (last error: refused)" {
		t.Errorf("failure %q", r.msg)
	}
	r.msg = ""
	EventuallyErr(&r, 5*time.Millisecond, time.Millisecond, "the socket", func() (bool, error) { return false, nil })
	if r.msg != "the socket: not within 5ms" {
		t.Errorf("failure without an error %q", r.msg)
	}
}

func TestReceive(t *testing.T) {
	var r fatalRecorder
	ch := make(chan int, 1)
	ch <- 7
	if got := Receive(&r, ch, 10*time.Second, "a value"); got != 7 || r.msg != "" {
		t.Errorf("a sent value: %d, failure %q", got, r.msg)
	}
	if got := Receive(&r, ch, 5*time.Millisecond, "nothing"); got != 0 || r.msg != "nothing: not within 5ms" {
		t.Errorf("nothing sent: %d, failure %q", got, r.msg)
	}
}
