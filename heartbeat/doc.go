// Package heartbeat registers a Node and keeps the control plane told that it
// is alive, as kubelet does: it creates the Node, computes its status with a
// nodestatus.StatusSetter, writes it to the nodes/status subresource, and
// renews the node Lease through package lease.
//
// # Usage
//
//	hb, err := heartbeat.New(heartbeat.Options{
//		Nodes:        clientset.CoreV1().Nodes(), // ideally as system:node:<name>
//		Leases:       clientset.CoordinationV1().Leases(lease.DefaultNamespace),
//		NodeName:     "node-a",
//		StatusSetter: setters,       // e.g. nodestatus.Setters
//		Node:         template,      // labels, annotations, taints
//	})
//	...
//	err = hb.Run(ctx)                // returns nil when ctx ends
//
// SyncOnce is the heartbeat's synchronous step: it does what is due
// (registration and its back-off, fast start-up checks, status rounds) and
// returns how long to wait before the next call. Run is a thin loop over it
// (plus the lease's own loop and the watch of the Node); a test harness or a
// scheduler of many nodes (package heartbeat/fleet) calls SyncOnce and
// the renewer's SyncOnce itself, so it runs exactly the code Run runs.
// Register, SyncStatus and SyncFastStatus are the parts of SyncOnce, for
// tests that want one alone.
//
// # Clients
//
// As every nodekit package, heartbeat declares the clients it uses per
// resource, with only the methods it calls and client-go's signatures:
// NodeClient, and lease.LeaseClient for the lease. A clientset's
// CoreV1().Nodes() and CoordinationV1().Leases(ns) are such clients as they
// are (a fake clientset's too), and so is a small client of one's own; the
// package does not import client-go's clientset and its scheme of every API
// group.
//
// # Strategies
//
// A HeartbeatStrategy says whether a lease is used and whether a computed
// status is posted. Two are provided:
//
//   - LeaseStrategy() (the default): the Lease is renewed every 10s (jitter 4%);
//     status is computed every NodeStatusUpdateFrequency (10s, jitter 4%)
//     and posted only when it changed (conditions' heartbeat times ignored)
//     or when NodeStatusReportFrequency (5m) has passed since the last post.
//     After a change (or the first post) the next periodic report is moved
//     by a random amount within ±2.5m, so that nodes spread their reports,
//     as kubelet does. Registering creates the Node with its computed
//     status, and that counts as the first post: a new node makes no status
//     write until something changes (a Node found registered already is
//     posted to at the first round).
//   - StatusOnlyStrategy(): no lease; the status is the heartbeat and is posted every
//     NodeStatusUpdateFrequency, changed or not.
//
// If NodeStatusUpdateFrequency is set and NodeStatusReportFrequency is not,
// the report frequency equals the update frequency (kubelet's rule).
//
// # Status rounds
//
// SyncStatus makes up to 5 attempts: the first computes from the newest node
// known (no request but the write): the node as last written, or as the
// watch of the Node last saw it when that is newer, so that a status written
// by others (the node lifecycle controller setting Ready=Unknown) is
// compared against and corrected within one round, as kubelet's informer
// does. Later attempts compute from a fresh GET.
// The setter runs on a deep copy; the node as read is never modified.
// Writes go to nodes/status:
//
//   - StrategicMergePatch (default): the patch from the node as read to the
//     node as computed, spec left out, addresses replaced whole. Conditions
//     merge by type, so conditions other agents wrote are kept.
//   - ServerSideApply: an apply under Options.FieldManager ("nodekit") of the
//     status fields the setters fill in and only the condition types this
//     agent wrote (the ones its setters changed, heartbeat time included,
//     and the ones it applied before). Other managers' conditions are never
//     in the request, so they cannot be lost.
//
// Every round also puts back the kubernetes.io/hostname, kubernetes.io/os and
// kubernetes.io/arch labels of the template when someone removed or changed
// them (a status write carrying the labels, which NodeRestriction allows a
// node on itself), as kubelet does.
//
// A Node found missing (404) ends the round with ErrNodeNotFound. kubelet
// registers once per process, and so does a Heartbeat by default: a deleted
// Node stays deleted until the agent restarts. With Options.ReRegister the
// next step registers it again and the lease's owner reference moves to the
// new UID. A round that does not post
// makes no request, so with the Lease strategy a deletion is noticed at the
// next write (the next status change, or the next report, within 5m), or
// sooner when the lease renewal finds the lease gone (in a cluster the
// garbage collector deletes the lease with its owner Node): the next round
// then reads the Node first.
//
// # Registration
//
// Register creates the Node from the template with a computed status. If the
// Node exists already it reconciles what the agent owns instead of failing:
// the managed labels (kubelet's default labels, from the template), capacity
// and allocatable, and the controller-managed attach/detach annotation, with
// one strategic-merge patch when something differs. Run retries with a
// back-off of 100ms doubling to 7s. The lease is first written once the Node
// is registered, so that it has its owner reference from the start.
//
// # Watching the Node
//
// Run keeps one watch of its own Node (a LIST and a WATCH with fieldSelector
// metadata.name=<node>, as kubelet's node informer; Options.DisableNodeWatch
// turns it off). Its API cost: one LIST of one object when Run starts and
// whenever the watch is re-established (the API server ends watches after
// 5-10 minutes), one open watch connection, and one event per change of the
// Node, the agent's own writes included (each about the size of the Node).
// No GET per round. SyncOnce alone never watches (a fleet of thousands of
// nodes would hold thousands of watches); it compares against the node as
// last written.
//
// # Failures and connections
//
// Options.OnRepeatedFailure is called after RepeatedFailures (2) consecutive
// failed requests and after each further one, as kubelet's
// onRepeatedHeartbeatFailure; an agent closes its API connections there so
// that a dead TCP connection is not reused (examples/agent does).
//
// # Start-up
//
// After registration SyncOnce checks every 100ms (FastStatusInterval) whether the
// computed status turned Ready, without any request, and posts it at once
// when it did; the checks stop when the node is Ready or after 120s
// (NodeReadyGracePeriod), as kubelet's fast status updates.
//
// # Reporting
//
// Metrics (through Options.Registerer, none by default; heartbeats sharing a
// registerer share them): nodekit_heartbeat_registrations_total,
// nodekit_heartbeat_registration_failures_total,
// nodekit_heartbeat_status_rounds_total, nodekit_heartbeat_status_posts_total,
// nodekit_heartbeat_status_failures_total and the histogram
// nodekit_heartbeat_status_duration_seconds, plus the lease's metrics when the
// heartbeat builds its renewer. Events NodeReady / NodeNotReady go to
// Options.Recorder when the posted Ready condition changes.
//
// # Differences from kubelet
//
// The defaults behave as kubelet v1.37's node status and lease loops. What
// still differs, and why:
//
//   - Options.ServerSideApply writes status under a field manager of its own
//     (kubelet only patches): an opt-in, so that conditions other agents own
//     are never in the request at all.
//   - Options.ReRegister registers a deleted Node again (kubelet never does
//     within one process): an opt-in for simulated nodes.
//   - SyncOnce without Run keeps no watch of the Node, so a node driven only
//     by SyncOnce (a fleet) sees what others wrote at its next post, not
//     within one status interval; Run watches, as kubelet's informer does.
//   - The required labels go back through the nodes/status patch rather than
//     a separate update of the Node; NodeRestriction accepts both.
//   - Request timeouts are wall time, not the injected clock.
//
// # Limits
//
// Request timeouts (Options.RequestTimeout, default 10s) are wall time, not
// the injected clock. The state kept per node is the last node object and
// the registration template, both protobuf-encoded (managed fields dropped;
// a status round decodes its working copy from them), a few timestamps and,
// with a lease, the last lease: a few KiB per node. Run uses a goroutine for
// the status loop, one for the lease loop and client-go's informer
// goroutines for the watch of the Node; SyncOnce uses none, so a scheduler
// of its own can drive many nodes.
//
// With the defaults an idle node writes about once per renew interval (one
// lease PUT of about 0.2 KiB, no GET) and posts its status only on a change
// or every 5m. The measured write load per hour, memory per node and the
// commands that measure them are in BENCHMARKS.md.
package heartbeat
