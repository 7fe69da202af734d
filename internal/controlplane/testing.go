package controlplane

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
)

// why holds the reason the package's control plane was not started, for Need.
var why string

// Main is a TestMain body: it starts one control plane for the package's
// tests, stores it in *out, runs the tests and stops it. In -short mode, or
// when the binaries are missing, *out stays nil and tests that call Need skip
// (under NODEKIT_REQUIRE_ALL=1 missing binaries fail the run instead).
func Main(m *testing.M, out **ControlPlane) int {
	return MainWith(m, out, Options{})
}

// MainWith is Main with the control plane's Options (Aggregator, for a
// package whose tests start metrics-server).
func MainWith(m *testing.M, out **ControlPlane, opts Options) int {
	flag.Parse()
	if testing.Short() {
		why = "control plane not started in -short mode"
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cp, err := Start(ctx, opts)
	cancel()
	switch {
	case errors.Is(err, ErrUnavailable):
		why = testenv.MissingMain("kube-apiserver and etcd", "testbin", err)
		return m.Run()
	case err != nil:
		fmt.Fprintf(os.Stderr, "control plane: %v\n", err)
		return 1
	}
	*out = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping control plane: %v\n", err)
	}
	return code
}

// Need returns cp, or skips t when the package's control plane was not
// started, saying why and which make target provides it.
func Need(t testing.TB, cp *ControlPlane) *ControlPlane {
	t.Helper()
	if cp == nil {
		switch {
		case why == "":
			testenv.Missing(t, "kube-apiserver and etcd", "testbin", errors.New("controlplane.Main was not called from TestMain"))
		case testenv.RequireAll() && !testing.Short():
			t.Fatalf("NODEKIT_REQUIRE_ALL=1: %s", why)
		default:
			t.Skip(why)
		}
	}
	return cp
}
