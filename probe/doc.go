// Package probe runs Kubernetes liveness, readiness and startup probes the
// way the kubelet (v1.37) does: a Prober that runs one probe, and a Manager
// that runs them for every container on kubelet's schedule.
// nodekit.NewPodHalf builds both.
//
// # Usage
//
//	handlers, _ := probe.NewHandlers(probe.HandlerOptions{Execer: rt}) // exec through CRI ExecSync
//	m, _ := probe.New(probe.Options{Prober: handlers, Recorder: rec, Registerer: reg})
//	go m.Run(ctx)
//	m.AddPod(pod)
//	m.SetPodStatus(pod.UID, status) // pod IP, container IDs, states, start times
//	r, ok := m.Result(pod.UID, "app", probe.Liveness)
//
// *Handlers, the default Prober, has kubelet's exec, HTTP, TCP and gRPC
// handlers and returns an Outcome (Success, Failure or Unknown, a message,
// and Err when the probe could not run). Exec runs through
// HandlerOptions.Execer (a runtime.Execer); HTTP sends kubelet's headers
// ("User-Agent: kube-probe/1.37"), treats 200–399 as Success and follows
// same-host redirects only; gRPC asks grpc.health.v1.Health/Check.
//
// The Manager keeps one worker per container and probe type (AddPod,
// RemovePod, StopLivenessAndStartup), publishes results (Result, Latest,
// Subscribe) and fills ContainerStatus.Started and Ready (UpdatePodStatus).
// Its rules are kubelet's: spec defaults (Defaults), initialDelaySeconds,
// liveness and readiness held until startup succeeds, thresholds of equal
// results in a row, a worker holding after a liveness Failure until the
// container has a new ID, a readiness worker starting from Success after an
// agent restart for a container that is Ready. Events (Unhealthy,
// ProbeWarning) go to Options.Recorder, and prober_probe_total and
// prober_probe_duration_seconds, kubelet's names and labels, to
// Options.Registerer.
//
// # Timing
//
// A liveness or startup worker's first round is a random part of its period
// after it is created, then one every period, so that pods added at once do
// not probe at once; a readiness worker's first round is when it is created
// (and again as soon as its container runs), or a random part of its period
// later when created within one period of the manager (an agent restart).
// Options.Rand draws the waits; NoStartJitter turns them off. A readiness
// probe that fails before its container was ever ready, while the
// container is younger than the period, is due again when the container's
// age has doubled (at least 250ms later): a container started at 0 and
// probed at once is probed at 250ms, 500ms, 1s, 2s, … until Ready or a
// period old. The container's age counts from its status's start time, or,
// as that may be whole seconds (as the API keeps it), from when a status
// first showed it running if that is sooner than a second after it. The
// failures of these extra rounds record no event.
// All workers sit in one timer heap on Options.Clock: Run sleeps until the
// earliest is due, then hands every worker due within Options.Batch
// (100ms) to at most Options.MaxConcurrentProbes (256) probe goroutines,
// which exist only while there is work. A worker is due again one period
// after it was due, once its probe finished, so a slow probe never overlaps
// its next round. SyncOnce runs what is due at the clock's now and returns
// the wait until the next. The manager's overhead for 10,000 containers is
// in BENCHMARKS.md.
//
// # Limits
//
// Every handler is bounded by timeoutSeconds and the caller's context; an
// exec probe on a runtime that never answers gives up HandlerOptions.
// ExecGrace (DefaultExecGrace, 2m) after its timeout. Messages are cut to
// MaxOutputBytes (10 KiB); a panicking handler is an Outcome whose Err
// matches ErrPanic. AddPod does not update the probe specs of existing
// workers (nor does the kubelet). h2c probes are not supported; gRPC TLS
// only with HandlerOptions.GRPCTLS. A Prober must honour its context. The
// probes themselves run on wall-clock deadlines.
//
// # Differences from the kubelet
//
//   - One timer heap and a bounded pool instead of a goroutine and ticker
//     per worker: an idle worker costs a heap entry, timer wake-ups are
//     batched, probes in flight are bounded, and removal cancels a probe in
//     flight.
//   - A liveness or startup worker's rounds start at a random point of its
//     first period, where the kubelet's start when its pod's sync creates
//     the worker: pods created at once would otherwise all probe within
//     the few seconds they arrived in, every period (a burst of exec probes
//     that time out on a small node, and restart containers that are fine).
//   - A readiness probe that fails while its container starts (above,
//     Timing) is retried sooner than its period. The kubelet probes again
//     whenever a sync of the pod finds the container not ready, which in a
//     starting pod is a few times within its first seconds; the engine
//     here syncs a pod only when something changed, so a server that
//     listened a moment after its first probe waited a full period
//     (10s by default) to be Ready.
//   - HTTP response headers are read up to MaxResponseHeaderBytes (8 KiB;
//     the kubelet reads up to 10 MiB), so a target sending endless headers
//     fails its probe instead of costing megabytes.
package probe
