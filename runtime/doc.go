// Package runtime is the container runtime as a node agent sees it, in CRI v1
// terms: the Runtime interface, composed of small interfaces (VersionStatuser,
// SandboxManager, ContainerManager, Execer, Streamer, ImageManager,
// StatsProvider) so that a caller asks only for what it uses, and Client, a
// CRI v1 gRPC client that implements it against containerd, CRI-O or any CRI
// runtime. The message types are those of k8s.io/cri-api/pkg/apis/runtime/v1.
//
// An in-memory fake and a gRPC server for any Runtime are in
// runtime/runtimetest; a contract suite that checks a Runtime behaves like a
// CRI runtime is in runtime/runtimetest/contract.
//
// # Connecting
//
//	rt, err := runtime.New(runtime.Options{}) // unix:///run/containerd/containerd.sock
//	if err != nil { ... }
//	defer rt.Close()
//
// New (or Dial, with a context) validates the options, connects, and makes a
// Version call that fails clearly when the endpoint does not serve the CRI v1
// runtime service (errors.Is(err, ErrNotCRIv1)) or is not there at all. The
// defaults are kubelet's: endpoint unix:///run/containerd/containerd.sock, a
// request timeout of 2m for each call (RunPodSandbox 4m; StopContainer and
// ExecSync get their own timeout on top; PullImage only its context), and a
// message size limit of 16 MiB. Timeouts must lie between 10ms and 1h.
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
// context.DeadlineExceeded or context.Canceled.
//
// ExecSync tells a command that exits non-zero (a result with its stdout,
// stderr and exit code, and no error) from one that does not finish in time
// (an error matching ErrExecTimeout: the runtime's DeadlineExceeded, or the
// context's deadline). Its timeout, and StopContainer's grace period, are
// rounded up to whole seconds, as CRI counts them (500ms is 1s, not 0, which
// would mean no limit).
//
// CRI defines stopping and removing something already gone as success; the
// client makes it so even where a runtime answers NotFound (containerd 1.6
// does for StopContainer and StopPodSandbox).
//
// # A runtime that goes away
//
// Calls made while the runtime is down fail at once with code Unavailable;
// nothing blocks or panics. The connection retries in the background with
// kubelet's backoff (100ms doubling to 3s, each attempt given 5s) and the
// calls succeed again once the runtime is back, without a new Client.
//
// # Streaming
//
// Streamer's Exec, Attach and PortForward do not stream themselves: the
// runtime answers with a URL on its own streaming server (containerd's
// stream_server_address and stream_server_port), to which a node API
// proxies the client's SPDY or WebSocket connection, as kubelet does. The
// URL is for one session and expires when not used within the runtime's
// time (containerd: 1 minute). Client returns the URL as the runtime gave
// it; a runtime that does not give one (an empty URL) is an error.
//
// # Optional methods
//
// PodSandboxMetricsLister and ContainerEventWatcher are newer CRI methods
// that Client implements but Runtime does not include: containerd 1.6
// answers them Unimplemented. StatsProvider is in Runtime, but its sandbox
// calls (PodSandboxStats, ListPodSandboxStats) may be Unimplemented on an
// older runtime: a caller falls back (nodestatus/usage reads the pod's
// cgroup).
//
// # Performance
//
// Client makes calls without logging, without per-call option slices, and
// builds an *Error only on failure; messages are encoded and decoded by
// gRPC's standard protobuf codec. BENCHMARKS.md compares it with
// k8s.io/cri-client (runtime/internal/bench).
package runtime
