package containerdtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/nodekit/nodekit/internal/testenv"
)

// why records, for Need, why Main left the instance nil; why2 the same for
// MainBoth's containerd 2 and Need2.
var why, why2 reasonState

type reasonState struct {
	sync.Mutex
	reason string
	short  bool
	err    error
}

// Main is for TestMain: it starts one containerd for the package's tests,
// runs them, stops it and returns the exit code:
//
//	var ctrd *containerdtest.Containerd
//	func TestMain(m *testing.M) { os.Exit(containerdtest.Main(m, &ctrd)) }
//
// In -short mode, or when a prerequisite is missing, it leaves *out nil and
// runs the tests anyway; Need then skips them with the reason. Under
// NODEKIT_REQUIRE_ALL=1 a missing prerequisite ends the run with status 1.
// A failure to start for any other reason also returns 1, without running
// the tests.
func Main(m *testing.M, out **Containerd) int { return MainFunc(m.Run, out) }

// MainFunc is Main around any function that runs the tests, for composing
// with another harness's Main:
//
//	os.Exit(containerdtest.MainFunc(func() int { return controlplane.Main(m, &cp) }, &ctrd))
func MainFunc(run func() int, out **Containerd) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	*out = nil
	if testing.Short() {
		setReason("containerd end-to-end tests do not run in -short mode", true, nil)
		return run()
	}
	c, err := Start(context.Background(), Options{})
	if errors.Is(err, ErrUnavailable) {
		setReason(testenv.MissingMain("containerd", "containerd", err), false, err)
		return run()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "containerdtest: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "containerdtest: containerd started in %v (%s snapshotter) at %s\n",
		c.StartDuration.Round(1e6), c.Snapshotter, c.Endpoint)
	*out = c
	code := run()
	*out = nil
	if code != 0 {
		fmt.Fprintf(os.Stderr, "containerdtest: tests failed; containerd's log ends with:\n%s\n", c.LogTail(60))
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "containerdtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func setReason(reason string, short bool, err error) { why.set(reason, short, err) }

func (w *reasonState) set(reason string, short bool, err error) {
	w.Lock()
	defer w.Unlock()
	w.reason, w.short, w.err = reason, short, err
}

// Need returns c, or skips t when c is nil: in -short mode with a plain skip,
// when containerd is unavailable through testenv.Missing (which fails under
// NODEKIT_REQUIRE_ALL=1) naming `make containerd`.
func Need(t testing.TB, c *Containerd) *Containerd {
	t.Helper()
	if c != nil {
		return c
	}
	why.Lock()
	reason, short, err := why.reason, why.short, why.err
	why.Unlock()
	switch {
	case short:
		t.Skip(reason)
	case err != nil:
		testenv.Missing(t, "containerd", "containerd", err)
	default:
		t.Fatal("containerdtest.Need: no containerd; call containerdtest.Main from TestMain")
	}
	return nil
}

// MainBoth is MainFunc with a containerd 2 (Options.Major 2) beside the
// host's containerd 1.x, for a package whose tests run on both:
//
//	var ctrd, ctrd2 *containerdtest.Containerd
//	func TestMain(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }
//
// It starts the two at once and stops both after the tests. A missing
// prerequisite of either leaves that one nil (Need and Need2 then skip
// with the reason), or ends the run with status 1 under
// NODEKIT_REQUIRE_ALL=1; any other failure to start returns 1 without
// running the tests.
func MainBoth(run func() int, out, out2 **Containerd) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	*out, *out2 = nil, nil
	if testing.Short() {
		setReason("containerd end-to-end tests do not run in -short mode", true, nil)
		why2.set("containerd 2 end-to-end tests do not run in -short mode", true, nil)
		return run()
	}
	type started struct {
		c   *Containerd
		err error
	}
	results := [2]chan started{make(chan started, 1), make(chan started, 1)}
	for i, major := range []int{1, 2} {
		go func() {
			c, err := Start(context.Background(), Options{Major: major})
			results[i] <- started{c, err}
		}()
	}
	r1, r2 := <-results[0], <-results[1]
	stopAll := func() (failed bool) {
		for _, c := range []*Containerd{r1.c, r2.c} {
			if c == nil {
				continue
			}
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "containerdtest: %v\n", err)
				failed = true
			}
		}
		return failed
	}
	for _, r := range []started{r1, r2} {
		if r.err != nil && !errors.Is(r.err, ErrUnavailable) {
			fmt.Fprintf(os.Stderr, "containerdtest: %v\n", r.err)
			stopAll()
			return 1
		}
	}
	if testenv.RequireAll() && (r1.err != nil || r2.err != nil) {
		stopAll() // MissingMain below exits
	}
	if r1.err != nil {
		setReason(testenv.MissingMain("containerd", "containerd", r1.err), false, r1.err)
	}
	if r2.err != nil {
		why2.set(testenv.MissingMain("containerd 2", "testbin", r2.err), false, r2.err)
	}
	for _, c := range []*Containerd{r1.c, r2.c} {
		if c != nil {
			fmt.Fprintf(os.Stderr, "containerdtest: containerd %s started in %v (%s snapshotter) at %s\n",
				c.RuntimeVersion, c.StartDuration.Round(1e6), c.Snapshotter, c.Endpoint)
		}
	}
	*out, *out2 = r1.c, r2.c
	code := run()
	*out, *out2 = nil, nil
	if code != 0 {
		for _, c := range []*Containerd{r1.c, r2.c} {
			if c != nil {
				fmt.Fprintf(os.Stderr, "containerdtest: tests failed; the log of containerd %s ends with:\n%s\n", c.RuntimeVersion, c.LogTail(60))
			}
		}
	}
	if stopAll() && code == 0 {
		code = 1
	}
	return code
}

// OnBoth runs test as subtest "containerd1" on c (Need) and then as
// "containerd2" on c2 (Need2), the two that MainBoth starts: one after the
// other, so that goroutine leak checks, which see the whole process, see
// one runtime's work at a time.
func OnBoth(t *testing.T, c, c2 *Containerd, test func(t *testing.T, c *Containerd)) {
	t.Run("containerd1", func(t *testing.T) { test(t, Need(t, c)) })
	t.Run("containerd2", func(t *testing.T) { test(t, Need2(t, c2)) })
}

// Need2 is Need for the containerd 2 that MainBoth starts: it returns c,
// or skips t (in -short mode, or when containerd 2 is unavailable, which
// fails under NODEKIT_REQUIRE_ALL=1, naming `make testbin`).
func Need2(t testing.TB, c *Containerd) *Containerd {
	t.Helper()
	if c != nil {
		return c
	}
	why2.Lock()
	reason, short, err := why2.reason, why2.short, why2.err
	why2.Unlock()
	switch {
	case short:
		t.Skip(reason)
	case err != nil:
		testenv.Missing(t, "containerd 2", "testbin", err)
	default:
		t.Fatal("containerdtest.Need2: no containerd 2; call containerdtest.MainBoth from TestMain")
	}
	return nil
}
