// Package probe runs Kubernetes liveness, readiness and startup probes the
// way the kubelet (v1.37) does.
//
// # Probing once
//
// NewHandlers returns the default Prober, *Handlers (kubelet's exec, HTTP,
// TCP and gRPC handlers), which runs one probe of one container and returns
// an Outcome: Success, Failure or Unknown, a message,
// and Err when the probe could not be run at all. The handler is chosen by
// the probe's spec:
//
//   - exec: the command runs through the runtime's ExecSync
//     (HandlerOptions.Execer, a runtime.Execer such as remote.Client) with the
//     probe's timeout. Exit code 0 is Success, any other Failure; the message
//     is stdout then stderr. A command that outlives its timeout is a Failure
//     that says so. $(VAR) in the command is expanded from the container's
//     literal env, as kubelet does.
//   - httpGet: GET scheme://host:port/path, host defaulting to the pod IP,
//     the port a number or the name of a container port, the spec's headers
//     (a Host header sets the request's Host), "User-Agent:
//     kube-probe/1.37" (HandlerOptions.Version) and "Accept: */*" unless set.
//     200–399 is Success. Same-host redirects are followed (10 requests at
//     most); a redirect to another host is not followed and is a Success with
//     Warning. At most 10 KiB of the body is read into the message.
//     Keep-alive is off: every probe opens its own connection.
//   - tcpSocket: Success when a connection opens within the timeout.
//   - grpc: grpc.health.v1.Health/Check with the optional service name on
//     the pod IP; SERVING is Success.
//
// Guard rails: every handler is bounded by timeoutSeconds (HTTP, TCP and
// gRPC by deadlines on the connection; exec, as in kubelet, by the runtime,
// which enforces ExecSync's timeout, and, for a runtime that never answers,
// by giving up HandlerOptions.ExecGrace (2m, kubelet's runtime request
// timeout) after the timeout), and by the caller's context. Messages are cut
// to MaxOutputBytes (10 KiB), HTTP response headers to MaxResponseHeaderBytes
// (8 KiB, where kubelet reads up to 10 MiB): a target that sends endless
// headers fails its probe instead of costing megabytes. A panicking handler is recovered and reported as an Outcome with
// Err matching ErrPanic.
//
// # The manager
//
// New returns a Manager that keeps one worker per container and probe
// type for the pods it is given (AddPod, RemovePod, StopLivenessAndStartup)
// and probes them on kubelet's schedule, from what SetPodStatus tells it (pod
// IP, container IDs, states and start times). Results are read with Result
// or Latest and pushed to Subscribe channels when they change; UpdatePodStatus
// fills ContainerStatus.Started and Ready from them. A pod sync loop
// restarts a container whose liveness or startup result is Failure and sets
// Ready from readiness.
//
// The rules, kubelet's:
//
//   - Spec defaults: timeoutSeconds 1, periodSeconds 10, successThreshold 1,
//     failureThreshold 3, initialDelaySeconds 0 (Defaults).
//   - A worker's first round is when it is created, then one every period.
//     A worker created within one period of the manager's creation (an agent
//     restart) first waits a random part of its period, drawn from
//     Options.Rand (Options.NoStartJitter turns this off).
//   - When a worker first sees a container ID it publishes the initial
//     result: liveness Success, readiness Failure, startup Unknown. After an
//     agent restart, a readiness worker whose pod's Ready condition is True
//     and whose container started before the manager was created starts
//     from Success instead, as kubelet's does, so the container stays Ready
//     (also in UpdatePodStatus before its first probe) until its probe fails
//     failureThreshold times. Other containers that were running more than
//     10s before the manager was created get no initial result.
//   - No probe runs during initialDelaySeconds after the container started.
//     Liveness and readiness wait until the startup probe has succeeded;
//     the startup probe stops once it has.
//   - A result changes only after successThreshold equal successes or
//     failureThreshold equal failures in a row.
//   - After a liveness Failure, and after a startup result either way, the
//     worker holds (no more probes) until the container has a new ID.
//   - A probe that could not run (Outcome.Err, a panic) is tried three times
//     in the round, then the round is dropped: the result stays as it was.
//     Unknown without Err counts as Failure.
//   - A container that is not running is published as Failure; its worker
//     ends when it exited and will not be restarted (restart policy and
//     rules), or when the pod's phase is Succeeded or Failed. When the pod
//     has a deletion timestamp, liveness and startup publish Success and end.
//   - Events, through Options.Recorder on the container's reference:
//     Warning Unhealthy "<Type> probe failed: <message>" for each failed
//     probe, "<Type> probe errored and resulted in unknown state: <err>" for
//     each errored round, Warning ProbeWarning for warnings. Metrics, through
//     Options.Registerer: prober_probe_total{probe_type, result,
//     container, pod, namespace, pod_uid} and prober_probe_duration_seconds,
//     kubelet's names and labels (nodekit's rule: kubelet's name where
//     kubelet has the metric, nodekit_<package>_* otherwise). Registering is
//     idempotent: managers that share a Registerer share the metrics.
//
// # Scheduling, and why not a goroutine per worker
//
// The kubelet runs a goroutine with its own ticker per worker. This manager
// keeps all workers in one min-heap (nodekit's timer heap) ordered by due
// time and driven by the
// injected clock: Run sleeps on a single timer until the earliest due time,
// then hands every due worker (and those due within Options.Batch,
// 100ms, after it) to a bounded pool of probe goroutines
// (Options.MaxConcurrentProbes, 256) that exist only while there is
// work. A worker is back in the heap one period after it was due, once its
// probe has finished; a slow probe therefore never overlaps its next round.
// The reasons: an idle worker costs a heap entry instead of a goroutine, a
// stack and a runtime timer; batching turns ~2,000 timer wake-ups a second
// (10,000 containers × 2 probes / 10s) into ~10; the number of probes in
// flight, hence sockets and exec sessions, is bounded; removal cancels a
// probe in flight; and SyncOnce, which runs exactly what is due at the
// clock's now and returns when those probes finished, with the wait until
// the next probe falls due (the step of Run, the same shape as heartbeat's
// step), makes fake-clock tests deterministic (with
// MaxConcurrentProbes 1, probes due together run in the order their workers
// were created). Run returns nil when its context ends.
//
// All time comes from Options.Clock. The probes themselves, which
// talk to the network and the runtime, are bounded by wall-clock deadlines.
//
// # Figures
//
// The manager's own overhead with 10,000 containers × 2 probes is about 1%
// of one core under a fake clock and 3–6% with the real clock;
// BENCHMARKS.md has the figures and the commands.
//
// # Limits
//
//   - Probe specs of existing workers are not updated by AddPod (kubelet does
//     not either); remove and re-add the pod.
//   - HTTP/2 cleartext (h2c) probes and gRPC TLS mode are kubelet alpha
//     features; h2c is not supported, gRPC TLS only with HandlerOptions.GRPCTLS.
//   - A Prober must honour its context; the manager cannot reclaim a pool
//     slot from a Prober that ignores it (the default Prober never does).
package probe
