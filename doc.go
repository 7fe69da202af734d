// Package nodekit is a library of Kubernetes node-agent building blocks, and
// their composition into an agent.
//
// Every Kubernetes node runs an agent (the kubelet) that registers the node,
// reports its status, renews its Lease, takes pods from static files, a
// manifest URL and the API server, runs them through a container runtime,
// probes them and writes their status back. nodekit offers each of those jobs
// as a package with a small interface and a default implementation that
// behaves like the kubelet, so that a custom node agent can take the parts it
// needs instead of forking the kubelet.
//
// # The composition
//
// This package composes the parts as the kubelet does, every part
// replaceable, resolved in construction order:
//
//	pods, _ := nodekit.NewPodHalf(nodekit.PodHalfOptions{NodeName: name, API: client.API(),
//		Backend: be.Build}) // podsync/cri/backend on a runtime, or any podsync.BackendFunc
//	node, _ := nodekit.NewNodeHalf(nodekit.NodeHalfOptions{NodeName: name, API: client.API(),
//		Node: nodekit.NodeTemplate(name, nil), Status: nodestatus.Options{Runtime: rt}, Pods: pods})
//	var agent nodekit.Group // started in order, stopped in reverse
//	_ = agent.Add("runtime", rt)
//	_ = agent.Add("pods", pods)
//	_ = agent.Add("node", node)
//	err := agent.Run(ctx)
//
// The pod half (sources, merger, mirror pods, probes, status writer,
// backend, admission, pod workers, eviction) is built first, from a
// podsync.BackendFunc: podsync/cri/backend's Build for a container runtime,
// a virtual node's own PodSyncer, or podsync/podsynctest's simulated pods.
// The node half (registration, status setters with CustomSetters, heartbeat
// and lease) is given the pod half, whose Node view and runtime status it
// feeds and reads. podsync/nodeapi's Port serves the kubelet's port for it.
// API is the API server as the halves use it, from Client
// (a small protobuf client of the node's identity) or a clientset; Group
// runs any Runnable. examples/criagent, examples/virtualnode and
// examples/hollownode show the three backends; examples/agent puts the
// kubelet's flags in front.
//
// # The parts
//
//	runtime            the container runtime through CRI v1: the Runtime interface;
//	                   runtime/remote the gRPC client and remote.Conn, a connection
//	                   made in the background; runtime/runtimetest an in-memory fake
//	nodestatus         Node.Status: StatusSetter and kubelet's setters in kubelet's
//	                   order; nodestatus/usage samples usage into the stats Summary
//	lease              the node's Lease in kube-node-lease, with kubelet's timing
//	heartbeat          registration and the HeartbeatStrategy; heartbeat/fleet runs
//	                   many hollow nodes, heartbeat/heartbeattest sets up fakes
//	podsource          desired pods from files, a URL and the API server, merged;
//	                   mirror pods
//	probe              liveness, readiness and startup probes
//	podsync            the backend-neutral pod workers, planner and status
//	                   generator; podsync/cri the kubelet's kuberuntime part on a
//	                   runtime.Runtime; podsync/cri/backend that syncer with pod data,
//	                   usage, log rotation and image GC; podsync/volume,
//	                   podsync/runtimeclass, podsync/admission, podsync/eviction, podsync/status,
//	                   podsync/logrotate; podsync/nodeapi the node API (port 10250);
//	                   podsync/podsynctest simulated pods
//
// # Dependency direction
//
// Lower parts never import higher ones:
//
//	examples            -> the composition (flags and config only)
//	nodekit             -> everything below
//	podsync/nodeapi     -> podsync, nodestatus/usage, runtime
//	podsync/cri/backend -> podsync/cri, podsync/volume, nodestatus/usage,
//	                       podsync/logrotate, podsync/eviction
//	podsync/cri         -> podsync, podsync/runtimeclass, runtime
//	podsync/runtimeclass -> podsync
//	podsync             -> podsource, probe, podsync/admission, podsync/eviction
//	podsync/eviction    -> podsync/admission -> podsource
//	heartbeat           -> nodestatus, lease
//	probe, nodestatus   -> runtime
//	runtime/remote      -> runtime
//	podsource, lease, runtime (no nodekit package but internal/)
//
// # Conventions
//
//   - Construction: New(Options) (*T, error); zero fields take the kubelet's
//     defaults, stated in each field's comment. An option out of bounds is an
//     error, never a panic, worded the same everywhere:
//     "<pkg>: Options.<Field> <v> must be in [<lo>, <hi>]", or, with one
//     bound, "<pkg>: Options.<Field> <v> must be at least <lo>" (at most
//     <hi>).
//   - Option names: Clock (k8s.io/utils/clock, the real one by default),
//     Registerer (nil: no metrics; registration is idempotent, so components
//     may share one), Recorder, Rand (func() float64 in [0, 1) everywhere).
//     The logger comes from the context (klog.FromContext).
//   - Loops: a synchronous step, SyncOnce(ctx) error or, for a loop that
//     decides its next wake-up, SyncOnce(ctx) (time.Duration, error), and a
//     Run(ctx) error that one helper, internal/loop, drives over it (a
//     negative wait: nothing scheduled). Run returns nil when ctx ends.
//   - API clients: per resource, named XClient (lease.LeaseClient,
//     heartbeat.NodeClient, status.PodClient), with only the methods used and
//     client-go's signatures, so a clientset's typed clients fit as they are;
//     a resource used in many namespaces comes through func(ns string). No
//     library package imports client-go's clientset.
//   - Time: no package reads the wall clock or sleeps; back-off and timer
//     heaps exist once, in internal/. Readers of state read published
//     snapshots and never wait on the network.
//   - Metrics: the kubelet's names and labels where it has the metric,
//     nodekit_<package>_* otherwise. Errors wrap with %w.
//   - Fakes live in public <package>test packages that never import testing.
//
// What a package does differently from the kubelet is kept in one place: the
// "Differences from the kubelet" section at the end of its package
// documentation. A package without one behaves as the kubelet does.
// Measured figures are in BENCHMARKS.md; renames are in CHANGELOG.md.
package nodekit
