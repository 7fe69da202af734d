// Package fleet runs many hollow nodes in one process, for scale
// simulations against a real cluster and for controller tests. Each node registers its Node, renews its Lease and
// posts its status with nodekit's own heartbeat, lease and nodestatus code
// (the default status setters, fed by fake host facts from
// nodestatus/nodestatustest), against a client of Nodes and one of Leases
// (NodeClient, LeaseClient: client-go's typed clients are such clients as
// they are): the fake clientset's under a fake clock, or a real API
// server's. As every nodekit package, fleet declares these clients per
// resource with client-go's signatures and does not import client-go's
// clientset.
//
// # Usage
//
//	clk := clocktesting.NewFakeClock(start)
//	client := heartbeattest.UIDClientset(fake.NewSimpleClientset())
//	f, _ := fleet.New(fleet.Options{Count: 1000, Clock: clk,
//		Nodes:  client.CoreV1().Nodes(),
//		Leases: client.CoordinationV1().Leases(lease.DefaultNamespace)})
//	f.SyncOnce(ctx)                 // registers every node
//	f.Step(ctx, 10*time.Second)     // every lease created
//	f.Node(3).Stop()                // the agent of node-3 dies
//	f.Node(4).SetCondition(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse})
//	f.Step(ctx, time.Minute)        // six 10s steps; run the controller under test between them
//
// Per node a test can stop and resume lease renewals and status rounds
// separately (StopLease, ResumeLease, StopStatus, ResumeStatus, Stop,
// Resume), make status or lease writes fail with a given error (FailStatus,
// FailLease), age the lease (AgeLease), set or clear any condition
// (SetCondition, ClearCondition: Ready, MemoryPressure or a type of one's
// own, through a setter the fleet adds after the node's setters), change the
// host facts the default setters read (Host, then Trigger), and delete and
// recreate the node (Delete, Recreate). Options.Template gives each node its
// labels, annotations, taints, addresses and capacity; Options.Facts its
// host facts. WaitRenewals, WaitRegistered, WaitNode and WaitLease wait, with
// a deadline, for counts or for an object to reach a state (ConditionIs,
// ConditionAbsent, NodeGone).
//
// # Scheduling and timing
//
// One scheduler serves the whole fleet: a heap of the nodes' next steps,
// keyed by time on the injected clock. A lease step is one renewal
// (lease.Renewer.SyncOnce, which returns its back-off after failures); a
// status step is one heartbeat.Heartbeat.SyncOnce, the very step Run loops
// over: it registers (with its back-off), runs the start-up fast checks
// while a new node is not Ready, re-registers a deleted node, and runs the
// status round, and says when it wants to run next. The fleet moves only the
// regular rounds onto each node's slot. Steps run on at most Options.Workers goroutines: Run keeps that
// many workers and one scheduler goroutine; SyncOnce runs what is due on as
// many short-lived goroutines and returns when it is done. No goroutine is
// kept per node, and a node costs a few KiB.
//
// Each node keeps a fixed slot in the renew interval (and another in the
// status interval): slot i is the fractional part of i times the golden
// ratio, so that renewals of any number of nodes are spread evenly, rounded
// up to a tick of Options.Granularity (1s by default), and a renewal that
// succeeds is followed by the node's next slot, not by the interval plus
// jitter. The nodes sharing a tick run as one batch: on a real API server
// that costs a third of the CPU of one request every few milliseconds (fewer
// wake-ups, requests in flight together), while the load stays even at the
// scale of a second. So under a fake clock the fleet is deterministic:
// after the first renew interval, moving the clock by the renew interval and
// calling SyncOnce (which Step does) renews every running lease exactly
// once, at the clock's time, and a node resumed with ResumeLease renews at
// its next slot. Status rounds follow kubelet's rules through the heartbeat
// (post on change or every StatusReportFrequency, 5m), and a node whose
// conditions a test changes is kicked to a round at once.
//
// # Costs and limits
//
// Per node: the heartbeat's registration template and last Node, kept
// protobuf-encoded (about 1 KiB each), the nodestatus setters, host facts,
// the lease renewer and its last Lease, and two entries of the timer heap; a
// few KiB in all, plus the objects in the fake clientset's tracker when one
// is used. No goroutine per node. BENCHMARKS.md has the measured figures
// (memory per node, CPU per step, real API server runs) and their commands.
//
//   - A test of lease behaviour with many nodes runs fastest with
//     heartbeattest.TrackerLeases (lease requests straight to the fake
//     clientset's object tracker), a long StatusUpdateFrequency and a
//     strategy that posts only changes (see Example_staleLeaseController).
//   - On a real API server, LeanLeases sends the renewers' lease requests as
//     protobuf without client-go's request builder (the same requests on the
//     wire), which costs less CPU.
//   - Status rounds compare against the node as each heartbeat last wrote
//     it: the fleet drives heartbeat.Heartbeat.SyncOnce, which keeps no watch
//     of the Node (a watch per hollow node would cost the API server more
//     than the nodes). Status written by others is seen at the next post.
//   - Nodes are registered again when deleted (heartbeat.Options.ReRegister),
//     unlike a kubelet.
package fleet
