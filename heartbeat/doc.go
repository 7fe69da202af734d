// Package heartbeat registers a Node and keeps the control plane told that it
// is alive, as kubelet does: it creates the Node, computes its status with a
// nodestatus.StatusSetter, writes it to the nodes/status subresource, and
// renews the node Lease through package lease. nodekit.NewNodeHalf builds
// one with the kubelet's defaults.
//
// # Usage
//
//	hb, err := heartbeat.New(heartbeat.Options{
//		Nodes:        clientset.CoreV1().Nodes(), // ideally as system:node:<name>
//		Leases:       clientset.CoordinationV1().Leases(lease.DefaultNamespace),
//		NodeName:     "node-a",
//		StatusSetter: setters,  // e.g. nodestatus.Setters
//		Node:         template, // labels, annotations, taints
//	})
//	err = hb.Run(ctx) // returns nil when ctx ends
//
// SyncOnce is the synchronous step Run loops over: registration and its
// back-off, fast start-up checks and status rounds, returning how long to
// wait before the next call; heartbeat/fleet drives many nodes by it.
// Register, SyncStatus and SyncFastStatus are its parts; the lease is
// configured by Options.LeaseOptions and renewed by SyncLease (Run starts
// its loop once the Node is registered). Trigger makes the
// next step a full status round. The Node as last written is published to a
// NodeView (Options.View, Heartbeat.View), which parts built before the
// heartbeat (a pod half's admission) read.
//
// A HeartbeatStrategy says whether a lease is used and whether a computed
// status is posted: LeaseStrategy (the default: lease renewed, status
// posted on change or every NodeStatusReportFrequency) or
// StatusOnlyStrategy (no lease; status posted every round). Writes are
// strategic-merge patches of nodes/status by default, conditions merged by
// type so that other agents' conditions are kept; a round makes up to 5
// attempts, the first from the node last known, later ones from a fresh
// GET. A Node found registered already is reconciled (managed labels,
// capacity, allocatable), not an error. A Node found deleted ends the round
// with ErrNodeNotFound.
//
// # Timing
//
// Kubelet's: status computed every NodeStatusUpdateFrequency (10s, jitter
// 4%), lease renewed every 10s; with the lease strategy, status posted when
// it changed (heartbeat times ignored) or every 5m, the next report moved
// within ±2.5m after a change. Registration back-off 100ms doubling to 7s.
// After registration a fast check every 100ms posts Ready at once, until
// Ready or 120s. Run keeps one watch of its own Node (one LIST and WATCH
// by name); SyncOnce alone keeps none. OnRepeatedFailure is called after
// RepeatedFailures (2) failed requests in a row, for the agent to close
// its connections. The measured write load and memory per node are in
// BENCHMARKS.md.
//
// # Limits
//
// Request timeouts (Options.RequestTimeout, 10s) are wall time, not the
// injected clock. The state per node is the last node and the template,
// protobuf-encoded, and the last lease: a few KiB. Run uses a goroutine for
// the status loop, one for the lease loop and the watch's; SyncOnce none.
// Metrics (nodekit_heartbeat_*) only through Options.Registerer.
//
// # Differences from the kubelet
//
//   - Options.WriteMode ServerSideApply (opt-in) writes status by
//     server-side apply under Options.FieldManager ("nodekit"), sending only the condition
//     types this agent wrote, so other managers' conditions are never in
//     the request.
//   - Options.ReRegister (opt-in, for simulated nodes) registers a deleted
//     Node again and moves the lease's owner reference; the kubelet
//     registers once per process.
//   - A node driven by SyncOnce without Run (a fleet) keeps no watch, so
//     what others wrote is seen at its next post, not within one interval.
//   - The required labels (kubernetes.io/hostname, os, arch) are put back
//     through the nodes/status patch rather than an update of the Node;
//     NodeRestriction accepts both.
package heartbeat
