package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/status"
	protov2 "google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/runtime"
)

// Defaults and bounds of Options. The defaults are kubelet's.
const (
	// DefaultEndpoint is containerd's CRI socket, kubelet's default endpoint.
	DefaultEndpoint = "unix:///run/containerd/containerd.sock"
	// DefaultRequestTimeout is kubelet's runtime request timeout.
	DefaultRequestTimeout = 2 * time.Minute
	// DefaultConnectionTimeout bounds the version check in Dial. Kubelet uses
	// its runtime request timeout for it.
	DefaultConnectionTimeout = 2 * time.Minute
	// DefaultMaxMessageSize is kubelet's gRPC message size limit (16 MiB).
	DefaultMaxMessageSize = 16 << 20

	// MinTimeout and MaxTimeout bound ConnectionTimeout and RequestTimeout.
	MinTimeout = 10 * time.Millisecond
	MaxTimeout = time.Hour
	// MinMaxMessageSize and MaxMaxMessageSize bound MaxMessageSize.
	MinMaxMessageSize = 64 << 10
	MaxMaxMessageSize = 1 << 30

	// Reconnection backoff, as kubelet configures gRPC: 100ms doubling to 3s,
	// each attempt given at least 5s to connect.
	reconnectBaseDelay  = 100 * time.Millisecond
	reconnectMaxDelay   = 3 * time.Second
	minConnectTimeout   = 5 * time.Second
	sandboxTimeoutScale = 2 // RunPodSandbox gets twice the request timeout, as in kubelet
)

// Options configure a Client. The zero value of each field means its default.
type Options struct {
	// Endpoint is the runtime's CRI socket as a "unix://" URL.
	// Default DefaultEndpoint (unix:///run/containerd/containerd.sock).
	Endpoint string
	// ConnectionTimeout bounds the version check that Dial makes.
	// Default DefaultConnectionTimeout (2m); between MinTimeout and MaxTimeout.
	ConnectionTimeout time.Duration
	// RequestTimeout bounds each call. RunPodSandbox gets twice as long;
	// StopContainer and ExecSync get it plus their own timeout; PullImage is
	// bounded only by its context, as in kubelet.
	// Default DefaultRequestTimeout (2m); between MinTimeout and MaxTimeout.
	RequestTimeout time.Duration
	// MaxMessageSize limits the size of a message sent or received, in bytes.
	// Default DefaultMaxMessageSize (16 MiB); between MinMaxMessageSize and
	// MaxMaxMessageSize.
	MaxMessageSize int
	// Registerer, when set, gets kubelet's runtime operation metrics:
	// kubelet_runtime_operations_total and
	// kubelet_runtime_operations_duration_seconds by operation_type
	// (run_podsandbox, create_container, …), for every call the Client
	// makes. Nil: none.
	Registerer prometheus.Registerer
	// Clock times the calls for those metrics. Default the real clock (a
	// Conn's ConnOptions.Clock when the Client is a Conn's).
	Clock clock.PassiveClock
}

// withDefaults fills in the defaults and validates the result.
func (o Options) withDefaults() (Options, error) {
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	if o.ConnectionTimeout == 0 {
		o.ConnectionTimeout = DefaultConnectionTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	var errs []error
	if path, ok := strings.CutPrefix(o.Endpoint, "unix://"); !ok || path == "" {
		errs = append(errs, fmt.Errorf("Options.Endpoint %q: want a unix socket as unix:///path", o.Endpoint))
	}
	errs = append(errs,
		optcheck.Range("Options.ConnectionTimeout", o.ConnectionTimeout, MinTimeout, MaxTimeout),
		optcheck.Range("Options.RequestTimeout", o.RequestTimeout, MinTimeout, MaxTimeout),
		optcheck.Range("Options.MaxMessageSize", o.MaxMessageSize, MinMaxMessageSize, MaxMaxMessageSize))
	return o, errors.Join(errs...)
}

// ErrNotCRIv1 is matched (errors.Is) by the error Dial returns when the
// endpoint answers but does not serve the CRI v1 runtime service.
var ErrNotCRIv1 = errors.New("endpoint does not serve runtime.v1 (CRI v1)")

// Client is a runtime.Runtime that talks CRI v1 over gRPC to a runtime such as
// containerd or CRI-O. It is safe for concurrent use. When the runtime goes
// away, calls fail with errors of gRPC code Unavailable (see runtime.IsUnavailable),
// and the client reconnects by itself when the runtime is back.
type Client struct {
	endpoint string
	timeout  time.Duration
	conn     *grpc.ClientConn
	metrics  *opMetrics

	// The lists' items kept between calls (lists.go).
	sandboxes  *listCache[*runtimeapi.PodSandbox]
	containers *listCache[*runtimeapi.Container]
	listCodec  grpc.CallOption
}

var (
	_ runtime.Runtime                 = (*Client)(nil)
	_ runtime.PodSandboxMetricsLister = (*Client)(nil)
	_ runtime.ContainerEventWatcher   = (*Client)(nil)
)

// New connects to the runtime at opts.Endpoint and checks that it serves CRI
// v1. It is Dial with a background context.
func New(opts Options) (*Client, error) {
	return Dial(context.Background(), opts)
}

// Dial connects to the runtime at opts.Endpoint and checks, with a Version
// call bounded by opts.ConnectionTimeout and ctx, that it serves CRI v1. A
// runtime that is not there, or does not serve runtime.v1 (ErrNotCRIv1), is an
// error; Dial does not wait for a runtime to appear.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	metrics, err := newOpMetrics(opts.Registerer, opts.Clock)
	if err != nil {
		return nil, fmt.Errorf("remote: Options.Registerer: %w", err)
	}
	conn, err := grpc.NewClient(opts.Endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(opts.MaxMessageSize),
			grpc.MaxCallSendMsgSize(opts.MaxMessageSize)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  reconnectBaseDelay,
				Multiplier: backoff.DefaultConfig.Multiplier,
				Jitter:     backoff.DefaultConfig.Jitter,
				MaxDelay:   reconnectMaxDelay,
			},
			MinConnectTimeout: minConnectTimeout,
		}),
	)
	if err != nil {
		return nil, &runtime.Error{Endpoint: opts.Endpoint, Method: "Dial", Err: err}
	}
	c := &Client{endpoint: opts.Endpoint, timeout: opts.RequestTimeout, conn: conn, metrics: metrics,
		sandboxes: newSandboxCache(), containers: newContainerCache(),
		listCodec: grpc.ForceCodecV2(listCodec{proto: encoding.GetCodecV2(proto.Name)})}

	vctx, cancel := context.WithTimeout(ctx, opts.ConnectionTimeout)
	defer cancel()
	// The runtime.v1 service answering at all is the check: the version
	// strings in the response are free-form (cri-client's fake says "0.1.0").
	resp := new(runtimeapi.VersionResponse)
	start := metrics.clock.Now()
	err = conn.Invoke(vctx, runtimeapi.RuntimeService_Version_FullMethodName, &runtimeapi.VersionRequest{Version: "v1"}, resp)
	metrics.observe("Version", start)
	if err != nil {
		_ = conn.Close()
		if status.Code(err) == codes.Unimplemented {
			return nil, &runtime.Error{Endpoint: opts.Endpoint, Method: "Version",
				Err: fmt.Errorf("%w: %w", ErrNotCRIv1, err)}
		}
		if status.Code(err) == codes.Unavailable {
			// Something listens but the connection failed: a server that
			// does not speak HTTP/2 (an HTTP/1 server) looks to gRPC like a
			// runtime that is down. Ask it directly, so that a wrong socket
			// is not mistaken for one to retry.
			if head, ok := sniffHTTP1(vctx, opts.Endpoint); ok {
				return nil, &runtime.Error{Endpoint: opts.Endpoint, Method: "Version",
					Err: fmt.Errorf("%w: %w", ErrNotCRIv1, status.Errorf(codes.FailedPrecondition, "the endpoint answers HTTP/1 (%q), not gRPC", head))}
			}
		}
		return nil, runtime.WrapError(vctx, opts.Endpoint, "Version", err)
	}
	return c, nil
}

// sniffTimeout bounds sniffHTTP1.
const sniffTimeout = time.Second

// sniffHTTP1 connects to the unix socket of endpoint, sends an HTTP/2 client
// preface and reports whether the answer is an HTTP/1 response, returning
// its first line.
func sniffHTTP1(ctx context.Context, endpoint string) (string, bool) {
	path := strings.TrimPrefix(endpoint, "unix://")
	ctx, cancel := context.WithTimeout(ctx, sniffTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// The HTTP/2 preface, then an empty SETTINGS frame.
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		return "", false
	}
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(conn, buf, len("HTTP/1.1 200"))
	head := string(buf[:n])
	if !strings.HasPrefix(head, "HTTP/1.") {
		return "", false
	}
	if i := strings.IndexAny(head, "\r\n"); i >= 0 {
		head = head[:i]
	}
	return head, true
}

// Endpoint returns the endpoint the client talks to.
func (c *Client) Endpoint() string { return c.endpoint }

// Close closes the connection. Calls made after Close fail.
func (c *Client) Close() error { return c.conn.Close() }

// invoke makes one unary call bounded by timeout (0: only ctx bounds it).
func (c *Client) invoke(ctx context.Context, timeout time.Duration, method, name string, req, resp any, opts ...grpc.CallOption) error {
	defer c.metrics.observe(name, c.metrics.clock.Now())
	var err error
	if timeout > 0 {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err = c.conn.Invoke(cctx, method, req, resp, opts...)
		if err != nil {
			err = runtime.WrapError(cctx, c.endpoint, name, err)
		}
		cancel()
		return err
	}
	err = c.conn.Invoke(ctx, method, req, resp, opts...)
	if err != nil {
		err = runtime.WrapError(ctx, c.endpoint, name, err)
	}
	return err
}

// ignoreNotFound turns NotFound into success, for the calls CRI defines as
// idempotent (stop and remove of something already gone). Some runtimes
// (containerd 1.6 for StopContainer and StopPodSandbox) answer NotFound there.
func ignoreNotFound(err error) error {
	if err != nil && runtime.IsNotFound(err) {
		return nil
	}
	return err
}

// Version returns the runtime's name and version and the CRI version it serves.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	resp := new(runtimeapi.VersionResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_Version_FullMethodName, "Version", &runtimeapi.VersionRequest{Version: "v1"}, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	resp := new(runtimeapi.StatusResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_Status_FullMethodName, "Status", &runtimeapi.StatusRequest{Verbose: verbose}, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// RunPodSandbox creates and starts a sandbox, within twice the request
// timeout as kubelet allows, and returns its ID.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	resp := new(runtimeapi.RunPodSandboxResponse)
	if err := c.invoke(ctx, sandboxTimeoutScale*c.timeout, runtimeapi.RuntimeService_RunPodSandbox_FullMethodName, "RunPodSandbox",
		&runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler}, resp); err != nil {
		return "", err
	}
	if resp.PodSandboxId == "" {
		return "", &runtime.Error{Endpoint: c.endpoint, Method: "RunPodSandbox", Err: status.Error(codes.Internal, "runtime returned an empty sandbox ID")}
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox stops a sandbox and its containers. A sandbox that is gone
// is not an error.
func (c *Client) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	return ignoreNotFound(c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_StopPodSandbox_FullMethodName, "StopPodSandbox",
		&runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID}, new(runtimeapi.StopPodSandboxResponse)))
}

// RemovePodSandbox removes a sandbox and its containers. A sandbox that is
// gone is not an error.
func (c *Client) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	return ignoreNotFound(c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_RemovePodSandbox_FullMethodName, "RemovePodSandbox",
		&runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID}, new(runtimeapi.RemovePodSandboxResponse)))
}

// PodSandboxStatus inspects a sandbox. A missing sandbox is an error for
// which runtime.IsNotFound is true.
func (c *Client) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp := new(runtimeapi.PodSandboxStatusResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_PodSandboxStatus_FullMethodName, "PodSandboxStatus",
		&runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose}, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// ListPodSandbox lists the sandboxes that match filter (nil: all). A
// sandbox the last list without a filter returned, and the runtime reports
// again byte for byte, is the message returned then, not decoded again:
// read the sandboxes, do not change them.
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	resp := &listResponse[*runtimeapi.PodSandbox]{cache: c.sandboxes, complete: protov2.Size(filter) == 0}
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, "ListPodSandbox",
		&runtimeapi.ListPodSandboxRequest{Filter: filter}, resp, c.listCodec); err != nil {
		return nil, err
	}
	return resp.items, nil
}

// CreateContainer creates a container in a sandbox and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp := new(runtimeapi.CreateContainerResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_CreateContainer_FullMethodName, "CreateContainer",
		&runtimeapi.CreateContainerRequest{PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig}, resp); err != nil {
		return "", err
	}
	if resp.ContainerId == "" {
		return "", &runtime.Error{Endpoint: c.endpoint, Method: "CreateContainer", Err: status.Error(codes.Internal, "runtime returned an empty container ID")}
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, containerID string) error {
	return c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_StartContainer_FullMethodName, "StartContainer",
		&runtimeapi.StartContainerRequest{ContainerId: containerID}, new(runtimeapi.StartContainerResponse))
}

// seconds rounds d up to whole seconds, as CRI counts timeouts; 0 or less is 0.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// StopContainer stops a container: SIGTERM, then SIGKILL after timeout
// rounded up to whole seconds. The call is bounded by the request timeout
// plus that. A container that is not running or gone is not an error.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeout time.Duration) error {
	secs := seconds(timeout)
	return ignoreNotFound(c.invoke(ctx, c.timeout+time.Duration(secs)*time.Second, runtimeapi.RuntimeService_StopContainer_FullMethodName, "StopContainer",
		&runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: secs}, new(runtimeapi.StopContainerResponse)))
}

// RemoveContainer removes a container, stopping it first if it runs. A
// container that is gone is not an error.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) error {
	return ignoreNotFound(c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_RemoveContainer_FullMethodName, "RemoveContainer",
		&runtimeapi.RemoveContainerRequest{ContainerId: containerID}, new(runtimeapi.RemoveContainerResponse)))
}

// ListContainers lists the containers that match filter (nil: all). As
// with ListPodSandbox, a container that did not change since the last list
// without a filter is the message returned then: read, do not change.
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	resp := &listResponse[*runtimeapi.Container]{cache: c.containers, complete: protov2.Size(filter) == 0}
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ListContainers_FullMethodName, "ListContainers",
		&runtimeapi.ListContainersRequest{Filter: filter}, resp, c.listCodec); err != nil {
		return nil, err
	}
	return resp.items, nil
}

// ContainerStatus inspects a container. A missing container is an error for
// which runtime.IsNotFound is true.
func (c *Client) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp := new(runtimeapi.ContainerStatusResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ContainerStatus_FullMethodName, "ContainerStatus",
		&runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose}, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// UpdateContainerResources changes the resources of a created or running
// container.
func (c *Client) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	return c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_UpdateContainerResources_FullMethodName, "UpdateContainerResources",
		&runtimeapi.UpdateContainerResourcesRequest{ContainerId: containerID, Linux: resources.GetLinux(), Windows: resources.GetWindows()},
		new(runtimeapi.UpdateContainerResourcesResponse))
}

// ReopenContainerLog makes the runtime reopen a running container's log file.
func (c *Client) ReopenContainerLog(ctx context.Context, containerID string) error {
	return c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ReopenContainerLog_FullMethodName, "ReopenContainerLog",
		&runtimeapi.ReopenContainerLogRequest{ContainerId: containerID}, new(runtimeapi.ReopenContainerLogResponse))
}

// UpdateRuntimeConfig passes the node's settings (the pod CIDR) to the runtime.
func (c *Client) UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) error {
	return c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_UpdateRuntimeConfig_FullMethodName, "UpdateRuntimeConfig",
		&runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: config}, new(runtimeapi.UpdateRuntimeConfigResponse))
}

// ExecSync runs cmd in a running container and waits for it. The runtime
// is given timeout rounded up to whole seconds (0: no limit), and the call is
// bounded by the request timeout plus that. A non-zero exit code is a result;
// a command that does not finish in time (the runtime's DeadlineExceeded, or
// the context's deadline) is an error matching runtime.ErrExecTimeout.
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtime.ExecResult, error) {
	secs := seconds(timeout)
	var callTimeout time.Duration
	if secs > 0 {
		callTimeout = c.timeout + time.Duration(secs)*time.Second
	}
	resp := new(runtimeapi.ExecSyncResponse)
	if err := c.invoke(ctx, callTimeout, runtimeapi.RuntimeService_ExecSync_FullMethodName, "ExecSync",
		&runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: secs}, resp); err != nil {
		return nil, err // a DeadlineExceeded matches runtime.ErrExecTimeout
	}
	return &runtime.ExecResult{Stdout: resp.Stdout, Stderr: resp.Stderr, ExitCode: resp.ExitCode}, nil
}

// ListImages lists the images that match filter (nil: all).
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	resp := new(runtimeapi.ListImagesResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.ImageService_ListImages_FullMethodName, "ListImages",
		&runtimeapi.ListImagesRequest{Filter: filter}, resp); err != nil {
		return nil, err
	}
	return resp.Images, nil
}

// ImageStatus inspects an image; a missing image has a nil Image and no error.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	resp := new(runtimeapi.ImageStatusResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.ImageService_ImageStatus_FullMethodName, "ImageStatus",
		&runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose}, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// PullImage pulls an image and returns its reference. Like kubelet, it
// applies no request timeout: only ctx bounds a pull.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp := new(runtimeapi.PullImageResponse)
	if err := c.invoke(ctx, 0, runtimeapi.ImageService_PullImage_FullMethodName, "PullImage",
		&runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandboxConfig}, resp); err != nil {
		return "", err
	}
	if resp.ImageRef == "" {
		return "", &runtime.Error{Endpoint: c.endpoint, Method: "PullImage", Err: status.Errorf(codes.Internal, "runtime returned an empty reference for image %q", image.GetImage())}
	}
	return resp.ImageRef, nil
}

// RemoveImage removes an image. An image that is gone is not an error.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return ignoreNotFound(c.invoke(ctx, c.timeout, runtimeapi.ImageService_RemoveImage_FullMethodName, "RemoveImage",
		&runtimeapi.RemoveImageRequest{Image: image}, new(runtimeapi.RemoveImageResponse)))
}

// ImageFsInfo reports the file systems that hold images and their usage.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	resp := new(runtimeapi.ImageFsInfoResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.ImageService_ImageFsInfo_FullMethodName, "ImageFsInfo",
		&runtimeapi.ImageFsInfoRequest{}, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// ListPodSandboxMetrics returns the runtime's pod sandbox metrics. Runtimes
// that do not collect them (containerd 1.6) answer Unimplemented.
func (c *Client) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	resp := new(runtimeapi.ListPodSandboxMetricsResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ListPodSandboxMetrics_FullMethodName, "ListPodSandboxMetrics",
		&runtimeapi.ListPodSandboxMetricsRequest{}, resp); err != nil {
		return nil, err
	}
	return resp.PodMetrics, nil
}

// WatchContainerEvents streams the runtime's container events to fn, one at a
// time, until ctx ends (it then returns ctx's error) or the stream fails.
// Runtimes without events (containerd 1.6) answer Unimplemented. The request
// timeout does not apply: the stream lives as long as ctx.
func (c *Client) WatchContainerEvents(ctx context.Context, fn func(*runtimeapi.ContainerEventResponse)) error {
	defer c.metrics.observe("GetContainerEvents", c.metrics.clock.Now())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.conn.NewStream(ctx, &containerEventsDesc, runtimeapi.RuntimeService_GetContainerEvents_FullMethodName)
	if err != nil {
		return runtime.WrapError(ctx, c.endpoint, "GetContainerEvents", err)
	}
	if err := stream.SendMsg(&runtimeapi.GetEventsRequest{}); err != nil && err != io.EOF {
		return runtime.WrapError(ctx, c.endpoint, "GetContainerEvents", err)
	}
	if err := stream.CloseSend(); err != nil {
		return runtime.WrapError(ctx, c.endpoint, "GetContainerEvents", err)
	}
	for {
		ev := new(runtimeapi.ContainerEventResponse)
		if err := stream.RecvMsg(ev); err != nil {
			if err == io.EOF {
				return nil
			}
			if cerr := ctx.Err(); cerr != nil && status.Code(err) == codes.Canceled {
				return cerr
			}
			return runtime.WrapError(ctx, c.endpoint, "GetContainerEvents", err)
		}
		fn(ev)
	}
}

// containerEventsDesc describes the GetContainerEvents server stream.
var containerEventsDesc = grpc.StreamDesc{StreamName: "GetContainerEvents", ServerStreams: true}
