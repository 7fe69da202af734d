// Package runtime is the container runtime as a node agent sees it, in CRI v1
// terms: the Runtime interface, composed of small interfaces (VersionStatuser,
// SandboxManager, ContainerManager, Execer, ImageManager) so that a caller
// asks only for what it uses, and Client, a CRI v1 gRPC client that
// implements it against containerd, CRI-O or any CRI runtime. The message
// types are those of k8s.io/cri-api/pkg/apis/runtime/v1.
//
// An in-memory fake, a gRPC server for any Runtime, and a contract suite that
// checks a Runtime behaves like a CRI runtime are in runtime/runtimetest.
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
// # Optional methods
//
// PodSandboxMetricsLister and ContainerEventWatcher are newer CRI methods
// that Client implements but Runtime does not include: containerd 1.6
// answers them Unimplemented.
//
// # Performance
//
// Client makes calls without logging, without per-call option slices, and
// builds an *Error only on failure. Responses to ListContainers and
// ContainerStatus are decoded by a decoder written for those messages, which
// allocates one buffer per response for all its strings and fills the structs
// directly; anything it does not expect (an unknown field, bad UTF-8) goes to
// the standard protobuf decoder, so results are identical (checked against
// proto.Unmarshal on random messages and on containerd's own responses). A
// consequence: the strings of a response share its buffer, which stays in
// memory while any of them is referenced.
//
// Against k8s.io/cri-client's remote runtime service (v0.37.2, without a
// tracer provider, its leanest setting), on the same k8s.io/cri-client/pkg/fake
// gRPC server over a unix socket, with 100 containers, on a 2-core machine
// shared with other work (load average 15-20), from runtime/internal/bench:
//
//	go test -run x -bench . -benchmem -count=6 -benchtime=0.3s > new.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /client new.txt
//
//	                    │    nodekit    │              cri-client               │
//	                    │    sec/op     │    sec/op      vs base                │
//	ListContainers100-2   7.203m ±  65%   3.371m ± 234%         ~ (p=0.699 n=6)
//	ContainerStatus-2     197.3µ ±  36%   533.1µ ±  65%  +170.27% (p=0.041 n=6)
//	ExecSync-2            169.4µ ± 274%   138.7µ ±  44%         ~ (p=0.132 n=6)
//
//	                    │    nodekit    │             cri-client              │
//	                    │     B/op      │     B/op       vs base              │
//	ListContainers100-2   248.4Ki ± 12%   270.0Ki ± 11%       ~ (p=0.132 n=6)
//	ContainerStatus-2     14.06Ki ±  0%   14.60Ki ±  1%  +3.85% (p=0.002 n=6)
//	ExecSync-2            10.09Ki ±  0%   10.23Ki ±  0%  +1.36% (p=0.002 n=6)
//
//	                    │   nodekit   │             cri-client              │
//	                    │  allocs/op  │  allocs/op   vs base                │
//	ListContainers100-2   3.382k ± 0%   7.392k ± 0%  +118.54% (p=0.002 n=6)
//	ContainerStatus-2      216.0 ± 0%    261.0 ± 0%   +20.83% (p=0.002 n=6)
//	ExecSync-2             168.0 ± 0%    173.0 ± 0%    +2.98% (p=0.002 n=6)
//
// On that machine sec/op swings with the other work, so the same directory
// also has paired benchmarks that call both clients in one loop, alternating
// which goes first, and report the ratio of their times:
//
//	go test -run x -bench Paired -count=10 -benchtime=0.5s > paired.txt
//	go run golang.org/x/perf/cmd/benchstat@latest paired.txt
//
//	                          │ nodekit/cri-client │
//	PairedListContainers100-2         763.3m ±  8%
//	PairedContainerStatus-2           964.2m ± 16%
//	PairedExecSync-2                  948.2m ± 19%
//
// That is: ListContainers of 100 containers takes about three quarters of
// cri-client's time; ContainerStatus and ExecSync take the same, within the
// noise (the server and the HTTP/2 transport dominate them). The allocation
// counts include the fake server's, which runs in the same process and is the
// same for both clients (about 2,900 of ListContainers' allocations): the
// client's own share of ListContainers falls from about
// 4,500 to about 500. Decoding alone (BenchmarkDecodeListContainers in this
// package) is about twice as fast with a fifth of the allocations.
package runtime
