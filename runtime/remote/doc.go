// Package remote is the CRI v1 gRPC client: Client implements
// runtime.Runtime (and runtime.PodSandboxMetricsLister and
// runtime.ContainerEventWatcher) against containerd, CRI-O or any CRI runtime
// on a unix socket, and Conn is a connection to one made in the background.
// The interface, the error type and its predicates are in package runtime.
//
// # Connecting
//
//	rt, err := remote.Dial(ctx, remote.Options{}) // unix:///run/containerd/containerd.sock
//	if err != nil { ... }
//	defer rt.Close()
//
// Dial (or New, with a background context) validates the options, connects,
// and makes a Version call that fails clearly when the endpoint does not
// serve the CRI v1 runtime service (errors.Is(err, ErrNotCRIv1)) or is not
// there at all. The defaults are kubelet's: endpoint
// unix:///run/containerd/containerd.sock, a request timeout of 2m for each
// call (RunPodSandbox 4m; StopContainer and ExecSync get their own timeout on
// top; PullImage only its context), and a message size limit of 16 MiB.
// Timeouts must lie between 10ms and 1h.
//
// Errors are *runtime.Error values naming the endpoint and the CRI method and
// keeping the runtime's gRPC status (see package runtime). Stopping and
// removing something already gone is success, even where a runtime answers
// NotFound. A streaming call (Exec, Attach, PortForward) that gets no URL from
// the runtime is an error.
//
// # Lists
//
// A relist asks for every sandbox and container each second, and nearly
// all of them are what the last list held. The Client keeps the items of
// the last ListPodSandbox and ListContainers without a filter, each with
// its encoded bytes, and decodes only items that are new or whose bytes
// changed; the others are the messages returned before. A list with a
// filter uses them and does not add to them, so what is kept is the
// runtime's sandboxes and containers at the last complete list. The
// returned messages are therefore shared between calls: read them, do not
// change them.
//
// # Metrics
//
// With Options.Registerer set, every call is counted and timed under
// kubelet's names, kubelet_runtime_operations_total and
// kubelet_runtime_operations_duration_seconds (kubelet's buckets), by
// operation_type in kubelet's words (run_podsandbox, create_container,
// list_containers, exec_sync, …): the time from the call to its answer,
// a timeout included. A dial's Version call counts as one, and a container
// event stream as one get_container_events, recorded when it ends, as
// kubelet records them. Clients on one registerer (a Conn's successive
// dials) share them.
//
// # A runtime that goes away
//
// Calls made while the runtime is down fail at once with code Unavailable
// (runtime.IsUnavailable); nothing blocks or panics. The connection retries in
// the background with kubelet's backoff (100ms doubling to 3s, each attempt
// given 5s) and the calls succeed again once the runtime is back, without a
// new Client.
//
// # A runtime that is not there yet
//
// Dial does not wait for a runtime to appear. Conn does: NewConn validates
// its options, and Run dials (each dial bounded by DialTimeout, 2s) with a
// back-off from RetryInitial (500ms) doubling to RetryMax (30s), timed by
// ConnOptions.Clock, until one succeeds; it logs "Connected to the container
// runtime" through the context's logger, and from then on the Client
// reconnects by itself. Run returns nil when its context ends, closing the
// connection.
//
// Conn is a runtime.Runtime all along, so an agent can build its parts and
// register its node before the runtime answers. A call made before the first
// dial ended waits for it (or for the call's context); while there is no
// connection, calls fail with an error matching ErrNotConnected, which after
// a failed dial wraps that dial's error too (runtime.IsUnavailable sees it).
// Err reports the same without waiting, nil once connected, for a node's
// Ready condition.
//
// # Performance
//
// Client makes calls without logging, without per-call option slices, and
// builds an error only on failure; messages are encoded and decoded by
// gRPC's standard protobuf codec. BENCHMARKS.md compares it with
// k8s.io/cri-client (runtime/internal/bench).
package remote
