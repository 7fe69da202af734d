// Package heartbeattest holds the fakes for testing code that meets
// heartbeats: client-go's fake clientset set up as an API server would be
// for nodes (UIDClientset: created objects get UIDs, so that leases get
// their owner reference), and a fast path for many nodes' lease requests
// straight to the fake's object tracker (TrackerLeases, for
// fleet.Options.Leases).
//
// Many controllable fake nodes (pause, fail and resume heartbeats under a
// fake clock) come from package heartbeat/fleet run on such a clientset:
//
//	client := heartbeattest.UIDClientset(fake.NewSimpleClientset())
//	f, _ := fleet.New(fleet.Options{Count: 1000, Clock: clk,
//		Nodes:  client.CoreV1().Nodes(),
//		Leases: heartbeattest.TrackerLeases(client.Tracker(), lease.DefaultNamespace)})
//
// Use client-go's plain object tracker (fake.NewSimpleClientset); the
// field-managed tracker (fake.NewClientset) serves server-side apply but
// costs some 5 ms per request in client-go v0.37, so use it only with
// heartbeat.ServerSideApply. The fake clientset records every request in
// Actions for its whole life: clear them (ClearActions) in long simulations.
//
// Like every nodekit fake package it does not import testing, so it may be
// linked into a binary; nor does it import client-go's clientset (the
// caller brings the fake one), so a binary that embeds it does not link
// client-go's scheme of every API group.
package heartbeattest
