// Package nodekit is a library of Kubernetes node-agent building blocks.
//
// Every Kubernetes node runs an agent (the kubelet) that registers the node,
// reports its status, renews its Lease, takes pods from static files, a
// manifest URL and the API server, runs them through a container runtime,
// probes them and writes their status back. nodekit offers each of those jobs
// as a package with a small interface and a default implementation that
// behaves like the kubelet, so that a custom node agent can take the parts it
// needs instead of forking the kubelet.
//
// # The parts
//
//	runtime     the container runtime through CRI v1: the Runtime interface, a
//	            gRPC client, and an in-memory fake in runtime/runtimetest
//	nodestatus  Node.Status from the host and the runtime: StatusSetter and the
//	            kubelet's default setters, in the kubelet's order;
//	            nodestatus/usage samples the node's, pods' and containers'
//	            CPU, memory, file system and network use into kubelet's
//	            stats Summary
//	lease       the node's Lease in kube-node-lease, renewed with the kubelet's
//	            timing and back-off
//	heartbeat   registration and the HeartbeatStrategy that keeps the control
//	            plane told the node is alive; heartbeat/fleet runs many
//	            hollow nodes (scale runs, controller tests), on a fake
//	            clientset set up by heartbeat/heartbeattest under a fake clock
//	podsource   desired pods from a manifest directory, a URL and the API
//	            server, merged into one stream, with mirror pods
//	probe       liveness, readiness and startup probes (exec, HTTP, TCP, gRPC)
//	podsync     makes the runtime match the desired pods and writes pod status;
//	            podsync/volume gives pods their volumes, env and pull
//	            credentials from the API; podsync/admission admits new pods
//	            as kubelet does; podsync/eviction reports memory, disk and
//	            PID pressure and evicts pods to relieve it, as kubelet's
//	            eviction manager; podsync/nodeapi serves kubelet's node
//	            API (/stats/summary, /metrics/resource, /pods,
//	            /containerLogs, /healthz, and /exec, /attach,
//	            /portForward, /run through the runtime's streaming server)
//	            as an http.Handler, and a Server that serves it over TLS,
//	            authenticated and authorized as kubelet's port 10250
//	examples    examples/agent composes the parts into a working node agent
//
// # How the parts compose
//
// Lower parts never import higher ones:
//
//	examples/agent
//	podsync/nodeapi    -> podsync, nodestatus/usage, runtime
//	podsync            -> podsource, probe, runtime
//	heartbeat          -> nodestatus, lease
//	probe              -> runtime
//	nodestatus         -> runtime
//	nodestatus/usage   -> runtime
//	podsource, lease, runtime
//
// An agent builds a runtime client, hands it to the nodestatus setters, gives
// the setters to a heartbeat, and runs the heartbeat; the pod half takes the
// merged pod stream from podsource and drives the runtime through podsync,
// with probe results feeding container restarts and readiness.
//
// # Conventions
//
// One way to do each thing, in every package:
//
//   - Construction: New(Options) (*T, error). Zero fields take the kubelet's
//     defaults, stated in each field's comment; a field out of bounds is an
//     error naming the package, the field, the value and the bounds
//     ("lease: Options.RenewInterval 10ns must be in [1s, 40s]"), never a
//     panic.
//   - Option names: Clock (a k8s.io/utils/clock clock, the real one by
//     default), Registerer (a Prometheus registerer; registration is
//     idempotent, so two components may share one), Recorder (an event
//     recorder), Rand (the source of jitter). The logger is never an option:
//     it comes from the context (klog.FromContext).
//   - Loops: every loop has a synchronous step and a blocking Run(ctx) that
//     is a thin loop around it, so a test or a fleet of simulated nodes drives
//     exactly the code Run drives. The step is SyncOnce(ctx) error, or, for a
//     loop that decides its own next wake-up, SyncOnce(ctx) (time.Duration,
//     error), which returns how long to wait before the next call (negative:
//     nothing is scheduled until the component is given new work). Run returns nil when its context ends and an
//     error only for a failure that stopped it. There are no stop channels.
//   - API clients: a package declares the clients it uses per resource
//     (lease.LeaseClient, heartbeat.NodeClient, status.PodClient, ...), with
//     only the methods it calls, each with the signature of client-go's
//     typed client, so that a clientset's per-resource client is one as it
//     is: heartbeat.Options{Nodes: cs.CoreV1().Nodes(), Leases:
//     cs.CoordinationV1().Leases(lease.DefaultNamespace)}. A resource used
//     in many namespaces comes through a function of the namespace under
//     the same field name: status.Options{Pods: func(ns string)
//     status.PodClient { return cs.CoreV1().Pods(ns) }}. A required client
//     that is missing is an error naming the field. No library package
//     imports client-go's clientset (its scheme registers every API group
//     at start-up, several MiB of a process's memory); examples/agent uses
//     internal/kubeclient, a small client with the same method shapes.
//   - Time: no package reads the wall clock or sleeps; back-off
//     (internal/backoff) and timer heaps (internal/timerheap) exist once.
//   - Readers of a component's state (a node, a lease, a probe result) read a
//     published snapshot and never wait on the network.
//   - Metrics: the kubelet's name and labels where the kubelet has the same
//     metric, so dashboards and alerts carry over; nodekit_<package>_*
//     otherwise.
//   - Errors are wrapped with %w and matched with errors.Is or errors.As; an
//     error that is returned is not also logged.
//   - Fakes for users' tests live in public <package>test packages that never
//     import testing, so a binary may embed them; no library package and no
//     example binary links the testing package (make test checks it).
package nodekit
