// Package lease keeps a node's Lease (kube-node-lease/<node>) alive, as
// kubelet's node lease controller does, with every timer injectable and every
// step callable on its own.
//
// # Usage
//
//	r, err := lease.New(lease.Options{Client: client, NodeName: "node-a"})
//	...
//	r.SetOwner(node.UID)   // the lease is created only once this is known
//	go r.Run(ctx)          // or: wait, err := r.SyncOnce(ctx) from your own scheduler
//
// # Behaviour and timing (defaults)
//
//   - The lease has holderIdentity the node name, leaseDurationSeconds 40 and
//     renewTime the injected clock's now.
//   - Run renews at once, then 10s (a quarter of the duration) after the end
//     of each successful renewal, plus up to 4% jitter. After a failed
//     renewal it waits a back-off of 200ms doubling to 7s instead, so a
//     renewal follows within 7s of the API server coming back.
//   - SyncOnce is one renewal; it returns the wait before the next one (the
//     interval with jitter, or the back-off), and Run is a loop over it.
//     The first one reads the lease and creates it if it is missing (get,
//     create). Later ones update from the lease last
//     written, with no GET: one PUT per renewal when nothing else touches
//     the lease. Up to 5 immediate update attempts; a 409 re-reads the lease
//     and retries; a 404 (the lease was deleted behind the renewer's back)
//     creates it again within the same renewal. A failed renewal keeps the
//     last lease, so the next one needs no extra read either.
//   - Owner reference: the Node (apiVersion v1, kind Node, name, uid). The
//     lease is created only once the UID is known, so it has its owner
//     reference from its first write (a renewal fails with ErrOwnerUnknown
//     until then), as kubelet waits for its Node. The UID comes from
//     Options.NodeUID, from SetOwner (what package heartbeat calls after
//     registration, and again when the Node is recreated with a new UID; it
//     costs no request), or, with Options.LookupNodeUID, from a GET of the
//     Node while the UID is unknown. An existing lease is renewed meanwhile,
//     and gets the reference on the next renewal.
//   - Options.OnRepeatedFailure is called after 2 consecutive failed
//     requests and each further one (kubelet's onRepeatedHeartbeatFailure):
//     the place to close dead API connections.
//   - Options.RequestTimeout (default min(renew interval, 10s), wall time)
//     bounds one renewal's requests together.
//
// # Many renewers in one process
//
// A Renewer holds its options, the last lease written (a few hundred bytes)
// and two mutexes; it starts no goroutine unless Run is called. A scheduler
// that drives thousands of renewers calls SyncOnce, which returns the wait
// before the next renewal. Latest reads a published snapshot and never waits
// for a renewal in flight. Renewers that share a prometheus.Registerer share
// one set of metrics (no per-node labels).
//
// # Metrics
//
// nodekit_lease_renewals_total, nodekit_lease_renewal_failures_total and the
// histogram nodekit_lease_renewal_duration_seconds, registered through
// Options.Registerer.
//
// # Measured
//
// One renewal (an update from the last lease written) on client-go's
// NewSimpleClientset, both renewers driven by the same
// wait.JitterUntilWithContext loop, on a loaded two-core machine
// (lease/internal/bench, a module of its own):
//
//	                                                ns/op       B/op   allocs/op
//	nodekit lease.Renewer                           ~20-70µs    3,900  37
//	component-helpers/apimachinery/lease controller ~25-60µs    3,780  39
//
// The time is the fake clientset's and indistinguishable between the two
// under this machine's load; the renewer's own share is the lease copy, the
// request timeout's context and the metrics. Run with:
//
//	cd lease/internal/bench && go test -run '^$' -bench . -benchmem -count 6 -benchtime 0.2s
//
// The write load on a real API server is in package heartbeat's doc: with
// the defaults a renewal is one PUT of about 0.2 KiB, 360 an hour.
package lease
