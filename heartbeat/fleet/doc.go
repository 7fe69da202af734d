// Package fleet runs many hollow nodes in one process, for scale
// simulations against a real cluster and for controller tests. Each node
// registers its Node, renews its Lease and posts its status with nodekit's
// own heartbeat, lease and nodestatus code (the default setters, fed by
// fake host facts from nodestatus/nodestatustest), against a NodeClient and
// a LeaseClient: the fake clientset's under a fake clock, or a real API
// server's.
//
// # Usage
//
//	clk := clocktesting.NewFakeClock(start)
//	client := heartbeattest.UIDClientset(fake.NewClientset())
//	f, _ := fleet.New(fleet.Options{Count: 1000, Clock: clk,
//		Nodes:  client.CoreV1().Nodes(),
//		Leases: client.CoordinationV1().Leases(lease.DefaultNamespace)})
//	f.SyncOnce(ctx)             // registers every node
//	f.Step(ctx, 10*time.Second) // every lease created
//	f.Node(3).Stop()            // the agent of node-3 dies
//	f.Node(4).SetCondition(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse})
//	f.Step(ctx, time.Minute)    // six 10s steps; run the controller under test between them
//
// Per node a test can stop and resume lease renewals and status rounds
// (StopLease, ResumeLease, StopStatus, ResumeStatus, Stop, Resume), make
// writes fail (FailStatus, FailLease), age the lease (AgeLease), set or
// clear any condition (SetCondition, ClearCondition), change the host facts
// (Host, then Trigger) and delete and recreate the node (Delete, Recreate).
// Options.Template and Options.Facts give each node its labels, taints,
// capacity and host facts. WaitRenewals, WaitRegistered, WaitNode and
// WaitLease wait, with a deadline, for counts or states (ConditionIs,
// ConditionAbsent, NodeGone).
//
// # Pods
//
// Options.Pods gives every node pods to run: a PodStep per node, run on
// the fleet's workers as the node's third step whenever its SyncOnce
// asked to be (its wait) or PodNode.Trigger was called. The fleet itself
// links no pod code: nodekit.FleetPods builds each node's step from
// nodekit's pod half (the pod workers with the kubelet's planner, probes,
// the status writer) on simulated containers (podsync/podsynctest, whose
// Rules choose each pod's behaviour), with one watch of all the fleet's
// bound pods and one client for every node's writes (ExampleFleetPods in
// the nodekit package). Delete stops a node's pod step with its other
// steps; Recreate runs it again.
//
// With package heartbeat/fleet/fleetapi every node also serves kubelet's
// node API (/stats/summary, /metrics/resource, /containerLogs, /pods) at an
// address of its own (127.64.0.1 and on: all of 127.0.0.0/8 is local on
// Linux), all on one listener, with kubelet's authentication and
// authorization: metrics-server scrapes each node's simulated usage
// (podsync/podsynctest/simapi), so kubectl top node and top pod show it,
// and kubectl logs reaches a node through the API server.
//
// # Timing
//
// One scheduler serves the whole fleet: a heap of the nodes' next steps on
// the injected clock. A lease step is one lease.Renewer.SyncOnce, a status
// step one heartbeat.Heartbeat.SyncOnce, the very steps Run loops over.
// Fleet.SyncOnce hands each step to a free worker as soon as it is due (a
// slow request holds up its worker only) and returns once none is due or
// running; Fleet.Run is a loop over it.
// Each node keeps a fixed slot in the renew interval (and one in the status
// interval), spread evenly by the golden ratio and rounded up to a tick of
// Options.Granularity (1s); nodes sharing a tick run as one batch on at
// most Options.Workers goroutines. Under a fake clock the fleet is
// deterministic: after the first renew interval, moving the clock by the
// renew interval and calling SyncOnce (which Step does) renews every running
// lease exactly once. Status rounds follow kubelet's rules through the
// heartbeat, and a node whose conditions a test changes is triggered to a
// round at once.
//
// # Limits
//
// Per node: the heartbeat's template and last Node (protobuf-encoded, about
// 1 KiB each), the setters, host facts, the renewer and its last Lease, and
// two heap entries; no goroutine. BENCHMARKS.md has the measured figures.
//
//   - Many-node lease tests run fastest with heartbeattest.TrackerLeases, a
//     long StatusUpdateFrequency and a strategy that posts only changes
//     (Example_staleLeaseController).
//   - On a real API server, LeanLeases sends the lease requests as protobuf
//     without client-go's request builder, for less CPU.
//
// # Differences from the kubelet
//
//   - A hollow node keeps no watch of its Node (heartbeat.SyncOnce without
//     Run): status written by others is seen at its next post.
//   - Nodes are registered again when deleted (heartbeat.Options.ReRegister).
//   - A renewal that succeeds is followed by the node's next slot, not by
//     the interval plus jitter.
package fleet
