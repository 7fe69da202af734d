package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/runtime"
)

// Defaults of ConnOptions.
const (
	// DefaultRetryInitial is the first wait after a failed dial.
	DefaultRetryInitial = 500 * time.Millisecond
	// DefaultRetryMax caps the wait between dials.
	DefaultRetryMax = 30 * time.Second
	// DefaultDialTimeout bounds one dial.
	DefaultDialTimeout = 2 * time.Second
)

// ErrNotConnected is matched (errors.Is) by the errors of a Conn's calls
// while it has no connection: before its first dial ended, after a failed
// one (the error then wraps the dial's error too), and after Run returned.
var ErrNotConnected = errors.New("container runtime not connected yet")

// ConnOptions configure a Conn. The zero value of each field means its default.
type ConnOptions struct {
	// Options configure each dial. Options.ConnectionTimeout defaults to
	// DialTimeout; the other fields have Dial's defaults.
	Options Options
	// Clock times the waits between dials and, when Options.Clock is not
	// set, the calls for the metrics. Default the real clock.
	Clock clock.Clock
	// RetryInitial is the wait after the first failed dial; each further
	// failure doubles it up to RetryMax. Default DefaultRetryInitial (500ms);
	// between MinTimeout and RetryMax.
	RetryInitial time.Duration
	// RetryMax caps the wait between dials. Default DefaultRetryMax (30s);
	// between RetryInitial and MaxTimeout.
	RetryMax time.Duration
	// DialTimeout bounds one dial, its Version check included. Default
	// DefaultDialTimeout (2s); between MinTimeout and MaxTimeout.
	DialTimeout time.Duration
}

// Conn is a runtime.Runtime whose connection is made in the background, so
// that an agent can register its node without waiting for the runtime. Run
// dials with back-off until it connects; from then on the Client reconnects
// by itself. A call made before the first dial ended waits for it (or for
// its context); while not connected, calls fail with an error matching
// ErrNotConnected and, after a failed dial, that dial's error.
type Conn struct {
	opts    ConnOptions
	dial    func(context.Context, Options) (*Client, error) // Dial; tests replace it
	running atomic.Bool

	first     chan struct{} // closed when the first dial ended
	firstOnce sync.Once

	mu     sync.Mutex
	client *Client // nil until connected and after Run returned
	err    error   // nil once connected
}

var (
	_ runtime.Runtime                 = (*Conn)(nil)
	_ runtime.PodSandboxMetricsLister = (*Conn)(nil)
	_ runtime.ContainerEventWatcher   = (*Conn)(nil)
)

// NewConn validates opts and returns a Conn that connects once Run runs.
func NewConn(opts ConnOptions) (*Conn, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RetryInitial == 0 {
		opts.RetryInitial = DefaultRetryInitial
	}
	if opts.RetryMax == 0 {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryInitial)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.Options.ConnectionTimeout == 0 {
		opts.Options.ConnectionTimeout = opts.DialTimeout
	}
	if opts.Options.Clock == nil {
		opts.Options.Clock = opts.Clock
	}
	dialOpts, err := opts.Options.withDefaults()
	errs := []error{err,
		optcheck.Range("ConnOptions.RetryInitial", opts.RetryInitial, MinTimeout, opts.RetryMax),
		optcheck.Range("ConnOptions.RetryMax", opts.RetryMax, MinTimeout, MaxTimeout),
		optcheck.Range("ConnOptions.DialTimeout", opts.DialTimeout, MinTimeout, MaxTimeout)}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	opts.Options = dialOpts
	return &Conn{opts: opts, dial: Dial, first: make(chan struct{}), err: ErrNotConnected}, nil
}

// Run dials until connected, then waits for ctx and closes the connection.
// It returns nil when ctx ends; calling it twice is an error.
func (c *Conn) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("remote: Conn.Run called twice")
	}
	logger := klog.FromContext(ctx)
	endpoint := c.opts.Options.Endpoint
	retry := backoff.Backoff{Initial: c.opts.RetryInitial, Max: c.opts.RetryMax}
	defer c.set(nil, ErrNotConnected) // calls after Run fail, and none waits
	for {
		start := c.opts.Clock.Now()
		dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
		cl, err := c.dial(dctx, c.opts.Options)
		cancel()
		if err == nil {
			c.set(cl, nil)
			v, verr := cl.Version(ctx)
			logger.Info("Connected to the container runtime", "endpoint", endpoint,
				"runtime", v.GetRuntimeName(), "version", v.GetRuntimeVersion(), "took", c.opts.Clock.Since(start), "versionErr", verr)
			<-ctx.Done()
			c.set(nil, ErrNotConnected)
			_ = cl.Close() // the reason it closes is ctx's end, not an error
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		c.set(nil, fmt.Errorf("%w: %w", ErrNotConnected, err))
		wait := retry.Next()
		logger.Error(err, "Cannot connect to the container runtime, will retry", "endpoint", endpoint, "backoff", wait)
		t := c.opts.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

func (c *Conn) set(cl *Client, err error) {
	c.mu.Lock()
	c.client, c.err = cl, err
	c.mu.Unlock()
	c.firstOnce.Do(func() { close(c.first) })
}

// Err returns nil while connected, else why not: an error matching
// ErrNotConnected (and the last dial's error after a failed dial). It does
// not wait, so a node's Ready setter can report it.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Client returns the connected Client, waiting for the first dial to end (or
// ctx), or the error of Err.
func (c *Conn) Client(ctx context.Context) (*Client, error) {
	select {
	case <-c.first:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrNotConnected, ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.client, c.err
}

// Endpoint returns the endpoint the Conn dials.
func (c *Conn) Endpoint() string { return c.opts.Options.Endpoint }

// call runs f on the connected Client, or fails as Client does.
func call[T any](c *Conn, ctx context.Context, f func(*Client) (T, error)) (T, error) {
	cl, err := c.Client(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(cl)
}

// do is call for the methods that return only an error.
func do(c *Conn, ctx context.Context, f func(*Client) error) error {
	_, err := call(c, ctx, func(cl *Client) (struct{}, error) { return struct{}{}, f(cl) })
	return err
}

// The methods below forward to the connected Client; see Client's for what
// each does.

func (c *Conn) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.VersionResponse, error) { return cl.Version(ctx) })
}

func (c *Conn) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.StatusResponse, error) { return cl.Status(ctx, verbose) })
}

func (c *Conn) UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) error {
	return do(c, ctx, func(cl *Client) error { return cl.UpdateRuntimeConfig(ctx, config) })
}

func (c *Conn) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	return call(c, ctx, func(cl *Client) (string, error) { return cl.RunPodSandbox(ctx, config, runtimeHandler) })
}

func (c *Conn) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	return do(c, ctx, func(cl *Client) error { return cl.StopPodSandbox(ctx, podSandboxID) })
}

func (c *Conn) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	return do(c, ctx, func(cl *Client) error { return cl.RemovePodSandbox(ctx, podSandboxID) })
}

func (c *Conn) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.PodSandboxStatusResponse, error) {
		return cl.PodSandboxStatus(ctx, podSandboxID, verbose)
	})
}

func (c *Conn) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return call(c, ctx, func(cl *Client) ([]*runtimeapi.PodSandbox, error) { return cl.ListPodSandbox(ctx, filter) })
}

func (c *Conn) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return call(c, ctx, func(cl *Client) (string, error) {
		return cl.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	})
}

func (c *Conn) StartContainer(ctx context.Context, containerID string) error {
	return do(c, ctx, func(cl *Client) error { return cl.StartContainer(ctx, containerID) })
}

func (c *Conn) StopContainer(ctx context.Context, containerID string, timeout time.Duration) error {
	return do(c, ctx, func(cl *Client) error { return cl.StopContainer(ctx, containerID, timeout) })
}

func (c *Conn) RemoveContainer(ctx context.Context, containerID string) error {
	return do(c, ctx, func(cl *Client) error { return cl.RemoveContainer(ctx, containerID) })
}

func (c *Conn) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return call(c, ctx, func(cl *Client) ([]*runtimeapi.Container, error) { return cl.ListContainers(ctx, filter) })
}

func (c *Conn) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.ContainerStatusResponse, error) {
		return cl.ContainerStatus(ctx, containerID, verbose)
	})
}

func (c *Conn) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	return do(c, ctx, func(cl *Client) error { return cl.UpdateContainerResources(ctx, containerID, resources) })
}

func (c *Conn) ReopenContainerLog(ctx context.Context, containerID string) error {
	return do(c, ctx, func(cl *Client) error { return cl.ReopenContainerLog(ctx, containerID) })
}

func (c *Conn) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtime.ExecResult, error) {
	return call(c, ctx, func(cl *Client) (*runtime.ExecResult, error) { return cl.ExecSync(ctx, containerID, cmd, timeout) })
}

func (c *Conn) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	return call(c, ctx, func(cl *Client) (string, error) { return cl.Exec(ctx, req) })
}

func (c *Conn) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	return call(c, ctx, func(cl *Client) (string, error) { return cl.Attach(ctx, req) })
}

func (c *Conn) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	return call(c, ctx, func(cl *Client) (string, error) { return cl.PortForward(ctx, req) })
}

func (c *Conn) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return call(c, ctx, func(cl *Client) ([]*runtimeapi.Image, error) { return cl.ListImages(ctx, filter) })
}

func (c *Conn) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.ImageStatusResponse, error) { return cl.ImageStatus(ctx, image, verbose) })
}

func (c *Conn) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return call(c, ctx, func(cl *Client) (string, error) { return cl.PullImage(ctx, image, auth, sandboxConfig) })
}

func (c *Conn) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return do(c, ctx, func(cl *Client) error { return cl.RemoveImage(ctx, image) })
}

func (c *Conn) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.ImageFsInfoResponse, error) { return cl.ImageFsInfo(ctx) })
}

func (c *Conn) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.ContainerStats, error) { return cl.ContainerStats(ctx, containerID) })
}

func (c *Conn) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return call(c, ctx, func(cl *Client) ([]*runtimeapi.ContainerStats, error) { return cl.ListContainerStats(ctx, filter) })
}

func (c *Conn) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	return call(c, ctx, func(cl *Client) (*runtimeapi.PodSandboxStats, error) { return cl.PodSandboxStats(ctx, podSandboxID) })
}

func (c *Conn) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return call(c, ctx, func(cl *Client) ([]*runtimeapi.PodSandboxStats, error) { return cl.ListPodSandboxStats(ctx, filter) })
}

func (c *Conn) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	return call(c, ctx, func(cl *Client) ([]*runtimeapi.PodSandboxMetrics, error) { return cl.ListPodSandboxMetrics(ctx) })
}

func (c *Conn) WatchContainerEvents(ctx context.Context, fn func(*runtimeapi.ContainerEventResponse)) error {
	return do(c, ctx, func(cl *Client) error { return cl.WatchContainerEvents(ctx, fn) })
}
