package runtime

import (
	"context"
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is everything a node agent asks of its container runtime, in CRI v1
// terms. It is composed of smaller interfaces so that a caller can ask for only
// the part it uses (a prober needs only an Execer).
type Runtime interface {
	VersionStatuser
	RuntimeConfigUpdater
	SandboxManager
	ContainerManager
	Execer
	Streamer
	ImageManager
	StatsProvider
}

// VersionStatuser reports what the runtime is and whether it is ready.
type VersionStatuser interface {
	// Version returns the runtime's name and version and the CRI version it serves.
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	// Status returns the RuntimeReady and NetworkReady conditions (and, where the
	// runtime reports them, its runtime handlers and features).
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// RuntimeConfigUpdater passes the node's configuration to the runtime.
type RuntimeConfigUpdater interface {
	// UpdateRuntimeConfig tells the runtime the node's settings, today the
	// pod CIDR (config.NetworkConfig.PodCidr), as kubelet does whenever
	// node.spec.podCIDR changes. A runtime that has nothing to do with it
	// (containerd without a CNI config template) accepts it and does nothing.
	UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) error
}

// SandboxManager runs and removes pod sandboxes.
type SandboxManager interface {
	// RunPodSandbox creates and starts a sandbox and returns its ID.
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	// StopPodSandbox stops a sandbox and every container in it. Stopping a
	// sandbox that is already stopped or gone is not an error.
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	// RemovePodSandbox removes a sandbox, stopping it first if it runs. Removing
	// a sandbox that is gone is not an error.
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	// PodSandboxStatus inspects a sandbox. A missing sandbox is an error with
	// gRPC code NotFound (see IsNotFound).
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	// ListPodSandbox lists the sandboxes that match filter (nil: all).
	// The sandboxes are the caller's to read, not to change: an
	// implementation may return the same message again in a later list
	// (remote.Client does for a sandbox that did not change).
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
}

// ContainerManager creates, starts, stops and removes containers.
type ContainerManager interface {
	// CreateContainer creates a container in a sandbox and returns its ID.
	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// StartContainer starts a created container.
	StartContainer(ctx context.Context, containerID string) error
	// StopContainer stops a running container, sending SIGTERM and, after
	// timeout (rounded up to whole seconds, as CRI counts), SIGKILL. Stopping a
	// container that is not running or gone is not an error.
	StopContainer(ctx context.Context, containerID string, timeout time.Duration) error
	// RemoveContainer removes a container, stopping it first if it runs.
	// Removing a container that is gone is not an error.
	RemoveContainer(ctx context.Context, containerID string) error
	// ListContainers lists the containers that match filter (nil: all),
	// to be read, not changed, as ListPodSandbox's.
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// ContainerStatus inspects a container. A missing container is an error with
	// gRPC code NotFound (see IsNotFound).
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	// UpdateContainerResources changes the resources (CPU, memory, ...) of a
	// created or running container in place.
	UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error
	// ReopenContainerLog makes the runtime reopen a running container's log
	// file, after the log was rotated. A container that is not running is an
	// error.
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Execer runs a command in a running container and waits for it.
type Execer interface {
	// ExecSync runs cmd in the container and returns its output and exit code.
	// A non-zero exit code is a result, not an error. When the command does not
	// finish within timeout (0: no limit), the error matches ErrExecTimeout.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*ExecResult, error)
}

// Streamer asks the runtime to serve a streaming session (exec, attach,
// port-forward) and returns the URL of its streaming server where the
// session is to be opened, as CRI's Exec, Attach and PortForward do. The
// caller (a node API) proxies the client's upgraded connection to that URL;
// the URL is good for one session and expires if not used soon (containerd:
// 1 minute). A missing container or sandbox is an error with gRPC code
// NotFound on runtimes that check at this point (see IsNotFound).
type Streamer interface {
	// Exec prepares a command (req.Cmd) in a running container with the
	// streams req asks for (stdin, stdout, stderr, tty) and returns the URL
	// where it is run.
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error)
	// Attach prepares an attachment to a running container's main process
	// and returns its URL.
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error)
	// PortForward prepares forwarding to ports in a ready pod sandbox's
	// network namespace and returns its URL. The ports are named by the
	// client when it opens streams; req.Port may list them beforehand.
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error)
}

// ExecResult is what a command run by ExecSync printed and how it exited.
type ExecResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int32
}

// ImageManager lists, inspects, pulls and removes images.
type ImageManager interface {
	// ListImages lists the images that match filter (nil: all).
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	// ImageStatus inspects an image. A missing image is not an error: the
	// response's Image is nil, as CRI specifies.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	// PullImage pulls an image and returns its reference.
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// RemoveImage removes an image. Removing an image that is gone is not an error.
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	// ImageFsInfo reports the file systems that hold images and their usage.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// StatsProvider reports the resource usage the runtime measures: CPU,
// memory and writable-layer use of containers, and of pod sandboxes where
// the runtime collects them (CRI ContainerStats, ListContainerStats,
// PodSandboxStats, ListPodSandboxStats, ImageFsInfo).
type StatsProvider interface {
	// ContainerStats returns the usage of one container. A missing container
	// is an error with gRPC code NotFound (see IsNotFound).
	ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error)
	// ListContainerStats returns the usage of the containers that match
	// filter (nil: all).
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	// PodSandboxStats returns the usage of one pod sandbox and its
	// containers. Runtimes that do not collect sandbox stats (containerd 1.6)
	// answer Unimplemented (see IsUnimplemented).
	PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error)
	// ListPodSandboxStats returns the usage of the sandboxes that match
	// filter (nil: all); Unimplemented where PodSandboxStats is.
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	// ImageFsInfo reports the file systems that hold images and their
	// usage. It is ImageManager's method, repeated so that a collector may
	// ask for a StatsProvider alone.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// ErrExecTimeout is matched (errors.Is) by the error ExecSync returns when the
// command did not finish within its timeout.
var ErrExecTimeout = errors.New("exec timed out")
