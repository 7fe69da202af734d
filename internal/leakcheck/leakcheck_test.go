package leakcheck

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records what a check reports.
type fakeTB struct {
	mu     sync.Mutex
	errors []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

//go:noinline
func leakyWorker(stop <-chan struct{}, done chan<- struct{}) {
	<-stop
	close(done)
}

// A goroutine started after the snapshot and still blocked at the end is
// reported with its stack; once it ends, the same snapshot passes.
func TestCheckCatchesLeak(t *testing.T) {
	s := Take()
	stop, done := make(chan struct{}), make(chan struct{})
	go leakyWorker(stop, done)

	var tb fakeTB
	start := time.Now()
	s.VerifyWithin(&tb, 50*time.Millisecond)
	if len(tb.errors) != 1 {
		t.Fatalf("a blocked goroutine gave %d reports, want 1", len(tb.errors))
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("reported after %v, before the wait of 50ms ran out", waited)
	}
	msg := tb.errors[0]
	for _, want := range []string{"1 goroutine(s) still running", "leakcheck.leakyWorker", "chan receive"} {
		if !strings.Contains(msg, want) {
			t.Errorf("report lacks %q:\n%s", want, msg)
		}
	}

	close(stop)
	<-done
	var again fakeTB
	s.VerifyWithin(&again, 5*time.Second)
	if len(again.errors) != 0 {
		t.Fatalf("after the goroutine ended: %v", again.errors)
	}
}

// A goroutine that ends a moment after the check began is waited for, not
// reported.
func TestCheckWaitsForEndingGoroutine(t *testing.T) {
	var tb fakeTB
	verify := Check(&tb)
	release := make(chan struct{})
	go func() { <-release }()
	// Ends 20ms into the check's wait of 5s.
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	verify()
	if len(tb.errors) != 0 {
		t.Fatalf("goroutines that ended during the wait were reported: %v", tb.errors)
	}
}

// Goroutines running at the snapshot are not reported, even if they outlive
// the check.
func TestCheckIgnoresEarlierGoroutines(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()
	var tb fakeTB
	Check(&tb)()
	if len(tb.errors) != 0 {
		t.Fatalf("a goroutine from before the snapshot was reported: %v", tb.errors)
	}
}

// Subtests and parallel tests parked in the test runner are not leaks.
func TestCheckIgnoresTestRunner(t *testing.T) {
	var tb fakeTB
	verify := Check(&tb)
	// "outer" starts after the snapshot and is parked in t.Run while
	// "inner" runs the check.
	t.Run("outer", func(t *testing.T) {
		t.Run("inner", func(t *testing.T) { verify() })
	})
	if len(tb.errors) != 0 {
		t.Fatalf("test runner goroutines were reported: %v", tb.errors)
	}
}

type fakeM struct {
	code int
	run  func()
}

func (m fakeM) Run() int {
	if m.run != nil {
		m.run()
	}
	return m.code
}

// Main fails a passing run that leaves a goroutine behind, and keeps a
// failing run's code.
func TestMainReportsLeaks(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	if got := Main(fakeM{}); got != 0 {
		t.Fatalf("clean run: Main = %d, want 0", got)
	}
	if got := Main(fakeM{code: 3}); got != 3 {
		t.Fatalf("failing run: Main = %d, want 3", got)
	}
	if got := mainWithin(fakeM{run: func() { go leakyWorker(stop, make(chan struct{})) }}, 20*time.Millisecond); got != 1 {
		t.Fatalf("leaking run: Main = %d, want 1", got)
	}
}

func TestParse(t *testing.T) {
	g, ok := parse("goroutine 42 [select, 3 minutes]:\nexample.com/p.(*T).loop(0xc000010000, {0x1, 0x2})\n\t/src/p.go:10 +0x1d\ncreated by example.com/p.Start in goroutine 1\n\t/src/p.go:5 +0x25")
	if !ok || g.id != 42 || g.state != "select, 3 minutes" || len(g.funcs) != 1 || g.funcs[0] != "example.com/p.(*T).loop" {
		t.Fatalf("parse = %+v, %v", g, ok)
	}
	if _, ok := parse("not a goroutine"); ok {
		t.Fatal("parsed a block without a header")
	}
}

// CheckSettling runs settle while it waits, so a goroutine that ends only
// when settle tells it to is not a leak; without settle it is.
func TestCheckSettling(t *testing.T) {
	stop := make(chan struct{})
	var once sync.Once
	settle := func() { once.Do(func() { close(stop) }) }

	var tb fakeTB
	verify := CheckSettling(&tb, settle)
	done := make(chan struct{})
	go leakyWorker(stop, done)
	verify()
	if len(tb.errors) != 0 {
		t.Fatalf("a goroutine that settle ended was reported: %v", tb.errors)
	}
	<-done

	var without fakeTB
	s := Take()
	stop2 := make(chan struct{})
	go leakyWorker(stop2, make(chan struct{}))
	s.VerifyWithin(&without, 20*time.Millisecond)
	close(stop2)
	if len(without.errors) != 1 {
		t.Fatalf("without settle: %d reports, want 1", len(without.errors))
	}
}
