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

// why records, for Need, why Main left the instance nil.
var why struct {
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

func setReason(reason string, short bool, err error) {
	why.Lock()
	defer why.Unlock()
	why.reason, why.short, why.err = reason, short, err
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
