// Package lease keeps a node's Lease (kube-node-lease/<node>) alive, as
// kubelet's node lease controller does, with every timer injectable and every
// step callable on its own.
//
// # Usage
//
//	r, err := lease.New(lease.Options{
//		Leases:   clientset.CoordinationV1().Leases(lease.DefaultNamespace),
//		NodeName: "node-a",
//	})
//	...
//	r.SetOwner(node.UID)   // the lease is created only once this is known
//	go r.Run(ctx)          // or: wait, err := r.SyncOnce(ctx) from your own scheduler
//
// # Clients
//
// As every nodekit package, lease declares the client it uses per
// resource, with only the methods it calls, each with the signature of
// client-go's typed client: LeaseClient (Get, Create, Update of Leases in
// one namespace) and NodeClient (Get of a Node, for LookupNodeUID). A
// clientset's CoordinationV1().Leases(ns) and CoreV1().Nodes() are such
// clients as they are, a fake clientset's too, and so is a small client of
// one's own: the package does not import client-go's clientset, whose
// scheme registers every API group (several MiB of a process's memory).
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
// and one mutex; it starts no goroutine unless Run is called. A scheduler
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
// # Cost
//
// A renewal is one PUT of about 0.2 KiB with the defaults, 360 an hour; its
// CPU cost beside component-helpers' lease controller is measured in
// BENCHMARKS.md (lease/internal/bench, a module of its own).
package lease
