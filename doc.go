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
//	            kubelet's default setters, in the kubelet's order
//	lease       the node's Lease in kube-node-lease, renewed with the kubelet's
//	            timing and back-off
//	heartbeat   registration and the HeartbeatStrategy that keeps the control
//	            plane told the node is alive; heartbeat/fleet runs many
//	            hollow nodes (scale runs, controller tests), on
//	            heartbeat/heartbeattest's fake clientset under a fake clock
//	podsource   desired pods from a manifest directory, a URL and the API
//	            server, merged into one stream, with mirror pods
//	probe       liveness, readiness and startup probes (exec, HTTP, TCP, gRPC)
//	podsync     makes the runtime match the desired pods and writes pod status
//	examples    examples/agent composes the parts into a working node agent
//
// # How the parts compose
//
// Lower parts never import higher ones:
//
//	examples/agent
//	podsync            -> podsource, probe, runtime
//	heartbeat          -> nodestatus, lease
//	probe              -> runtime
//	nodestatus         -> runtime
//	podsource, lease, runtime
//
// An agent builds a runtime client, hands it to the nodestatus setters, gives
// the setters to a heartbeat, and runs the heartbeat; the pod half takes the
// merged pod stream from podsource and drives the runtime through podsync,
// with probe results feeding container restarts and readiness.
//
// # Conventions
//
// Every part is built with New(Options), whose zero fields take the kubelet's
// defaults and whose bad fields are errors, never panics. Every loop has a
// synchronous step (SyncOnce) and a blocking Run(ctx) that returns when the
// context ends. Time comes from an injected k8s.io/utils/clock clock, so a
// test can drive every loop with a fake clock; logging comes from the
// context's logr logger; metrics registries and event recorders come through
// Options, never from globals.
package nodekit
