// Package runtime is the container runtime as a node agent sees it, in CRI v1
// terms: the Runtime interface, composed of small interfaces (VersionStatuser,
// SandboxManager, ContainerManager, Execer, Streamer, ImageManager,
// StatsProvider) so that a caller asks only for what it uses, the optional
// interfaces of newer CRI methods, and the error type every implementation
// returns. The message types are those of k8s.io/cri-api/pkg/apis/runtime/v1.
//
// The package holds no implementation, so a node agent with a backend of its
// own (a virtual node) links no gRPC client. The CRI v1 gRPC client, for
// containerd, CRI-O or any CRI runtime, is runtime/remote (remote.Dial, and
// remote.Conn for a connection made in the background); an in-memory fake and
// a gRPC server for any Runtime are in runtime/runtimetest; a contract suite
// that checks a Runtime behaves like a CRI runtime is in
// runtime/runtimetest/contract.
//
// # Errors
//
// A failed call returns an *Error naming the endpoint and the CRI method, for
// example
//
//	cri unix:///run/containerd/containerd.sock: ContainerStatus: NotFound: an error occurred when try to find container "0a1b": not found
//
// It keeps the runtime's gRPC status: status.Code and status.FromError see
// through it (it implements GRPCStatus and unwraps), however often the caller
// wraps it again; IsNotFound, IsUnimplemented and IsUnavailable test the
// usual codes. When the call's context ended, errors.Is also matches
// context.DeadlineExceeded or context.Canceled. WrapError builds such an
// error for an implementation that talks to a runtime; the fake's errors
// read the same.
//
// ExecSync tells a command that exits non-zero (a result with its stdout,
// stderr and exit code, and no error) from one that does not finish in time
// (an error matching ErrExecTimeout; NewExecTimeoutError makes one). Its
// timeout, and StopContainer's grace period, are rounded up to whole
// seconds, as CRI counts them (500ms is 1s, not 0, which would mean no
// limit).
//
// CRI defines stopping and removing something already gone as success; the
// implementations make it so even where a runtime answers NotFound
// (containerd 1.6 does for StopContainer and StopPodSandbox).
//
// # Streaming
//
// Streamer's Exec, Attach and PortForward do not stream themselves: the
// runtime answers with a URL on its own streaming server (containerd's
// stream_server_address and stream_server_port), to which a node API
// proxies the client's SPDY or WebSocket connection, as kubelet does. The
// URL is for one session and expires when not used within the runtime's
// time (containerd: 1 minute).
//
// # Optional methods
//
// PodSandboxMetricsLister and ContainerEventWatcher are newer CRI methods
// that remote.Client implements but Runtime does not include: containerd 1.6
// answers them Unimplemented. StatsProvider is in Runtime, but its sandbox
// calls (PodSandboxStats, ListPodSandboxStats) may be Unimplemented on an
// older runtime: a caller falls back (nodestatus/usage reads the pod's
// cgroup).
package runtime
