package remote_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func newConn(t *testing.T, opts remote.ConnOptions) *remote.Conn {
	t.Helper()
	c, err := remote.NewConn(opts)
	if err != nil {
		t.Fatalf("NewConn: %v", err)
	}
	return c
}

// run runs c in the background; the returned stop ends it and returns what
// Run returned.
func run(t *testing.T, c *remote.Conn) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var err error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// The contract suite on a Conn, over the fake served on a unix socket.
func TestContractConnOverFake(t *testing.T) {
	contractOverFake(t, func(t *testing.T, ep string) runtime.Runtime {
		c := newConn(t, remote.ConnOptions{Options: remote.Options{Endpoint: ep}})
		run(t, c)
		return c
	})
}

func TestConnOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  remote.ConnOptions
		field string
	}{
		{"tcp endpoint", remote.ConnOptions{Options: remote.Options{Endpoint: "tcp://127.0.0.1:1"}}, "Options.Endpoint"},
		{"nanosecond retry", remote.ConnOptions{RetryInitial: 10}, "ConnOptions.RetryInitial"},
		{"retry above its max", remote.ConnOptions{RetryInitial: time.Minute, RetryMax: time.Second}, "ConnOptions.RetryInitial"},
		{"huge retry max", remote.ConnOptions{RetryMax: 48 * time.Hour}, "ConnOptions.RetryMax"},
		{"nanosecond dial timeout", remote.ConnOptions{DialTimeout: 5}, "ConnOptions.DialTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := remote.NewConn(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("NewConn: %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

func TestConnUnreachable(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ep := "unix://" + socketPath(t)
	c := newConn(t, remote.ConnOptions{Options: remote.Options{Endpoint: ep}, Clock: clk})
	if err := c.Err(); !errors.Is(err, remote.ErrNotConnected) {
		t.Errorf("Err before Run = %v, want ErrNotConnected", err)
	}
	ctx := context.Background()
	// Before the first dial ended, a call waits for it, or for its context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Version(cctx); !errors.Is(err, remote.ErrNotConnected) || !errors.Is(err, context.Canceled) {
		t.Errorf("Version before the first dial, context canceled: %v, want ErrNotConnected and Canceled", err)
	}

	stop := run(t, c)
	_, err := c.Version(ctx) // waits for the first dial
	if !errors.Is(err, remote.ErrNotConnected) || !runtime.IsUnavailable(err) || !strings.Contains(err.Error(), "cri "+ep+": Version: Unavailable") {
		t.Errorf("Version after a failed dial: %v, want ErrNotConnected wrapping the dial's Unavailable", err)
	}
	if err := c.StartContainer(ctx, "c1"); !errors.Is(err, remote.ErrNotConnected) {
		t.Errorf("StartContainer after a failed dial: %v, want ErrNotConnected", err)
	}
	if err := c.Err(); !errors.Is(err, remote.ErrNotConnected) || !runtime.IsUnavailable(err) {
		t.Errorf("Err after a failed dial = %v", err)
	}
	testenv.Eventually(t, 15*time.Second, 20*time.Millisecond, "Run waits to retry", clk.HasWaiters)
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil when its context ends", err)
	}
	if err := c.Run(ctx); err == nil {
		t.Error("a second Run: nil error")
	}
}

func TestConnConnectsAndRetries(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	path := socketPath(t)
	c := newConn(t, remote.ConnOptions{Options: remote.Options{Endpoint: "unix://" + path}, Clock: clk,
		RetryInitial: time.Second, RetryMax: 4 * time.Second})
	stop := run(t, c)
	ctx := context.Background()
	if _, err := c.Client(ctx); !errors.Is(err, remote.ErrNotConnected) {
		t.Fatalf("Client with no runtime: %v, want ErrNotConnected", err)
	}
	testenv.Eventually(t, 15*time.Second, 20*time.Millisecond, "Run waits to retry", clk.HasWaiters)

	f := runtimetest.New(runtimetest.Options{})
	down := serve(t, path, runtimetest.NewServer(f).Register) // the runtime comes up
	defer down()
	clk.Step(time.Second)
	testenv.Eventually(t, 15*time.Second, 20*time.Millisecond, "Conn connects", func() bool { return c.Err() == nil })

	v, err := c.Version(ctx)
	if err != nil || v.RuntimeName != runtimetest.DefaultRuntimeName {
		t.Errorf("Version once connected = %v, %v", v, err)
	}
	if err := c.UpdateRuntimeConfig(ctx, nil); err != nil {
		t.Errorf("UpdateRuntimeConfig once connected: %v", err)
	}
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Errorf("ListContainers once connected: %v", err)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil when its context ends", err)
	}
	if _, err := c.Version(ctx); !errors.Is(err, remote.ErrNotConnected) {
		t.Errorf("Version after Run returned: %v, want ErrNotConnected", err)
	}
}

// A Conn times its calls for the metrics by ConnOptions.Clock when
// Options.Clock is not set.
func TestConnTimesCallsByItsClock(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	path := socketPath(t)
	f := runtimetest.New(runtimetest.Options{})
	// Each ListContainers takes 3s of the Conn's clock, stepped by the
	// runtime while it answers.
	f.SetHooks(runtimetest.Hooks{
		ListContainers: func(context.Context, *runtimeapi.ContainerFilter) error { clk.Step(3 * time.Second); return nil },
	})
	down := serve(t, path, runtimetest.NewServer(f).Register)
	defer down()
	reg := prometheus.NewRegistry()
	c := newConn(t, remote.ConnOptions{Options: remote.Options{Endpoint: "unix://" + path, Registerer: reg}, Clock: clk})
	stop := run(t, c)
	testenv.Eventually(t, 15*time.Second, 20*time.Millisecond, "Conn connects", func() bool { return c.Err() == nil })
	ctx := context.Background()
	for range 2 {
		if _, err := c.ListContainers(ctx, nil); err != nil {
			t.Fatalf("ListContainers: %v", err)
		}
	}
	if d := testenv.Histograms(t, reg, "kubelet_runtime_operations_duration_seconds", "operation_type")["list_containers"]; d.Count != 2 || d.Sum != 6 {
		t.Errorf("list_containers: %d calls taking %v s by the Conn's clock, want 2 taking 6 s", d.Count, d.Sum)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v", err)
	}
}
