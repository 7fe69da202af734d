package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Timeout is how long Check, Verify and Main wait for new goroutines to end.
const Timeout = 5 * time.Second

// TB is the part of testing.TB the checks use.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Snapshot is the set of goroutines running at one moment.
type Snapshot struct {
	ids map[uint64]bool
}

// Take returns the goroutines running now.
func Take() Snapshot {
	s := Snapshot{ids: map[uint64]bool{}}
	for _, g := range goroutines() {
		s.ids[g.id] = true
	}
	return s
}

// Check takes a snapshot now and returns a function that verifies against
// it: defer leakcheck.Check(t)().
func Check(t TB) func() {
	s := Take()
	return func() {
		t.Helper()
		s.Verify(t)
	}
}

// CheckSettling is Check with settle run before each look at the
// goroutines: for goroutines that end only when told, such as the reader of
// an HTTP/2 connection that a request cancelled at the end of the test left
// busy for a moment, settle closes what has become idle since.
func CheckSettling(t TB, settle func()) func() {
	s := Take()
	return func() {
		t.Helper()
		if leaked := s.waitSettling(Timeout, settle); len(leaked) > 0 {
			t.Errorf("%s", report(leaked, Timeout))
		}
	}
}

// Verify waits up to Timeout until no goroutine remains that was not in s
// (apart from the ignored ones, see the package comment) and otherwise
// reports each remaining one with its stack through t.Errorf.
func (s Snapshot) Verify(t TB) {
	t.Helper()
	s.VerifyWithin(t, Timeout)
}

// VerifyWithin is Verify with a wait of d.
func (s Snapshot) VerifyWithin(t TB, d time.Duration) {
	t.Helper()
	if leaked := s.wait(d); len(leaked) > 0 {
		t.Errorf("%s", report(leaked, d))
	}
}

// M is the part of *testing.M that Main uses.
type M interface{ Run() int }

// Main is a TestMain body: it runs the tests and, when they pass, checks that
// no goroutine started during the run is left, printing the leaked stacks and
// returning 1 when one is. It returns the exit code for os.Exit.
func Main(m M) int { return mainWithin(m, Timeout) }

func mainWithin(m M, d time.Duration) int {
	s := Take()
	code := m.Run()
	if code != 0 {
		return code
	}
	if leaked := s.wait(d); len(leaked) > 0 {
		fmt.Fprintln(os.Stderr, report(leaked, d))
		return 1
	}
	return 0
}

// wait polls until no new goroutine remains or d has passed, and returns
// the new ones still there.
func (s Snapshot) wait(d time.Duration) []goroutine { return s.waitSettling(d, nil) }

// waitSettling is wait with settle, when not nil, run before each look.
func (s Snapshot) waitSettling(d time.Duration, settle func()) []goroutine {
	deadline := time.Now().Add(d)
	pause := time.Microsecond
	for {
		if settle != nil {
			settle()
		}
		leaked := s.fresh()
		if len(leaked) == 0 || !time.Now().Before(deadline) {
			return leaked
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// fresh returns the goroutines that are neither in s nor benign.
func (s Snapshot) fresh() []goroutine {
	self := currentID()
	var out []goroutine
	for _, g := range goroutines() {
		if g.id == self || s.ids[g.id] || benign(g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func report(leaked []goroutine, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "leakcheck: %d goroutine(s) still running %v after the check began:", len(leaked), d)
	for _, g := range leaked {
		b.WriteString("\n\n")
		b.WriteString(g.stack)
	}
	return b.String()
}

// goroutine is one goroutine as runtime.Stack prints it.
type goroutine struct {
	id    uint64
	state string // "chan receive", "select", "running", ...
	funcs []string
	stack string
}

// has reports whether fn is one of the functions on g's stack.
func (g goroutine) has(fn string) bool {
	for _, f := range g.funcs {
		if f == fn {
			return true
		}
	}
	return false
}

// benign reports whether g is one of the runtime's signal-handling
// goroutines or is parked in the test runner itself (a parent test waiting
// for its subtests, a test waiting in t.Parallel).
func benign(g goroutine) bool {
	if len(g.funcs) == 0 {
		return false
	}
	switch g.funcs[0] {
	case "os/signal.signal_recv", "os/signal.loop":
		return true
	}
	if g.has("runtime.ensureSigM") {
		return true
	}
	for _, f := range g.funcs {
		if strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "sync.") || strings.HasPrefix(f, "internal/sync.") {
			continue
		}
		return strings.HasPrefix(f, "testing.")
	}
	return false
}

// goroutines returns every goroutine's stack.
func goroutines() []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		if g, ok := parse(string(block)); ok {
			out = append(out, g)
		}
	}
	return out
}

// parse reads one block of runtime.Stack's output:
//
//	goroutine 7 [chan receive, 2 minutes]:
//	main.worker(...)
//		/src/main.go:12 +0x1d
//	created by main.start in goroutine 1
//		/src/main.go:8 +0x25
func parse(block string) (goroutine, bool) {
	block = strings.TrimSpace(block)
	header, rest, _ := strings.Cut(block, "\n")
	idText, ok := strings.CutPrefix(header, "goroutine ")
	if !ok {
		return goroutine{}, false
	}
	idText, stateText, ok := strings.Cut(idText, " [")
	if !ok {
		return goroutine{}, false
	}
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil {
		return goroutine{}, false
	}
	g := goroutine{id: id, state: strings.TrimSuffix(stateText, "]:"), stack: block}
	for _, line := range strings.Split(rest, "\n") {
		if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by ") || strings.HasPrefix(line, "...") {
			continue
		}
		g.funcs = append(g.funcs, funcName(line))
	}
	return g, true
}

// funcName strips the arguments from a frame line: "pkg.(*T).m(0x1, ...)"
// gives "pkg.(*T).m".
func funcName(line string) string {
	if i := strings.LastIndex(line, "("); i > 0 && strings.HasSuffix(line, ")") {
		return line[:i]
	}
	return line
}

// currentID returns the ID of the calling goroutine.
func currentID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	text, _ := strings.CutPrefix(string(buf), "goroutine ")
	text, _, _ = strings.Cut(text, " ")
	id, _ := strconv.ParseUint(text, 10, 64)
	return id
}
