package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// Bounds of the runtime connection loop.
const (
	runtimeDialTimeout    = 2 * time.Second
	runtimeRetryFirst     = 500 * time.Millisecond
	runtimeRetryMax       = 30 * time.Second
	runtimeRequestTimeout = 10 * time.Second
)

// errRuntimeNotConnected is returned while no connection to the runtime was
// ever made.
var errRuntimeNotConnected = errors.New("container runtime not connected yet")

// runtimeConn is the agent's container runtime. It connects in the
// background, so that registration does not wait for the runtime, and serves
// the status setters (nodestatus.RuntimeInfo) in the meantime: a call made
// before the first connection attempt has finished waits for it; after a
// failed attempt calls fail (the node is reported NotReady with the reason)
// while the component keeps dialling with back-off. Once connected, the
// client reconnects by itself, so dialling stops.
//
// The pod half of the agent takes the full runtime.Runtime from Runtime once
// connected.
type runtimeConn struct {
	endpoint string
	clock    clock.Clock

	first     chan struct{} // closed when the first attempt ended
	firstOnce sync.Once

	mu  sync.Mutex
	rt  runtime.Runtime
	err error
}

// newRuntimeConn returns a connection to endpoint, or the in-memory fake when
// endpoint is empty.
func newRuntimeConn(endpoint string, clk clock.Clock) *runtimeConn {
	r := &runtimeConn{endpoint: endpoint, clock: clk, first: make(chan struct{}), err: errRuntimeNotConnected}
	if endpoint == "" {
		r.rt = runtimetest.New(runtimetest.Options{NoCallLog: true})
		r.err = nil
		r.firstOnce.Do(func() { close(r.first) })
	}
	return r
}

// Fake reports whether the runtime is the in-memory fake.
func (r *runtimeConn) Fake() bool { return r.endpoint == "" }

// Run dials until connected, then waits for ctx and closes the connection.
func (r *runtimeConn) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if r.Fake() {
		logger.Info("No --container-runtime-endpoint: using the in-memory fake runtime (nothing runs; the node reports runtime fake://" + runtimetest.DefaultRuntimeVersion + ")")
		<-ctx.Done()
		return nil
	}
	retry := backoff.Backoff{Initial: runtimeRetryFirst, Max: runtimeRetryMax}
	for {
		start := r.clock.Now()
		dctx, cancel := context.WithTimeout(ctx, runtimeDialTimeout)
		c, err := runtime.Dial(dctx, runtime.Options{
			Endpoint:          r.endpoint,
			ConnectionTimeout: runtimeDialTimeout,
			RequestTimeout:    runtimeRequestTimeout,
		})
		cancel()
		if err == nil {
			r.set(c, nil)
			v, verr := c.Version(ctx)
			logger.Info("Connected to the container runtime", "endpoint", r.endpoint,
				"runtime", v.GetRuntimeName(), "version", v.GetRuntimeVersion(), "took", r.clock.Since(start), "versionErr", verr)
			<-ctx.Done()
			return c.Close()
		}
		if ctx.Err() != nil {
			r.set(nil, ctx.Err())
			return nil
		}
		r.set(nil, fmt.Errorf("container runtime at %s: %w", r.endpoint, err))
		wait := retry.Next()
		logger.Error(err, "Cannot connect to the container runtime, will retry", "endpoint", r.endpoint, "backoff", wait)
		t := r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

func (r *runtimeConn) set(c *runtime.Client, err error) {
	r.mu.Lock()
	if c != nil {
		r.rt = c
	}
	r.err = err
	r.mu.Unlock()
	r.firstOnce.Do(func() { close(r.first) })
}

// Runtime returns the runtime once connected. It waits for the first
// connection attempt.
func (r *runtimeConn) Runtime(ctx context.Context) (runtime.Runtime, error) {
	select {
	case <-r.first:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rt != nil {
		return r.rt, nil
	}
	return nil, r.err
}

// Version, Status and ListImages make runtimeConn a nodestatus.RuntimeInfo;
// UpdateRuntimeConfig lets the PodCIDR setter pass spec.podCIDRs to the runtime.

func (r *runtimeConn) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.Version(ctx)
}

func (r *runtimeConn) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.Status(ctx, verbose)
}

func (r *runtimeConn) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.ListImages(ctx, filter)
}

func (r *runtimeConn) UpdateRuntimeConfig(ctx context.Context, cfg *runtimeapi.RuntimeConfig) error {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return err
	}
	return rt.UpdateRuntimeConfig(ctx, cfg)
}

// Exec, Attach, PortForward and ExecSync make runtimeConn the node API's
// nodeapi.StreamRuntime: the connected runtime's, an error before.

func (r *runtimeConn) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return "", err
	}
	return rt.Exec(ctx, req)
}

func (r *runtimeConn) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return "", err
	}
	return rt.Attach(ctx, req)
}

func (r *runtimeConn) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return "", err
	}
	return rt.PortForward(ctx, req)
}

func (r *runtimeConn) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtime.ExecResult, error) {
	rt, err := r.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	return rt.ExecSync(ctx, containerID, cmd, timeout)
}
