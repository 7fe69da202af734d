// Package podsync is the backend-neutral core of the pod half: it makes a
// backend match the desired pods and computes their status, as the
// kubelet's pod workers and status generator do, split so that each part
// can be used and tested alone. It links no CRI, cgroup or mount code:
// the CRI backend is podsync/cri (assembled with its companions by
// podsync/cri/backend), and nodekit.NewPodHalf composes the engine with
// sources, probes, the status writer, admission and eviction.
//
// # Parts
//
//   - ComputePodActions, the pure planner: desired pod + observed PodState +
//     probe results + clock and crash-loop back-off → PodActions. No I/O.
//   - GeneratePodStatus, the pure status generator: phase, conditions,
//     container statuses, IPs, start time, QoS class; times in whole
//     seconds, as the API keeps them.
//   - PodSyncer, the pod-level seam with the kubelet's three calls (SyncPod,
//     SyncTerminatingPod, SyncTerminatedPod), and Relister, which observes a
//     backend. podsync/cri implements both on a runtime.Runtime;
//     podsync/podsynctest simulates pods; a virtual node plugs in its own
//     (SyncerFuncs adapts functions; examples/virtualnode).
//   - Backend, BackendParts and BackendFunc: how a pod half builds its
//     backend from the parts made before it; Triggers lets those parts ask
//     for a pod to be synced soon, and RuntimeClasses resolves pods'
//     runtimeClassName (podsync/runtimeclass).
//   - Engine: one worker per pod UID fed by podsource.Update, a relist, a
//     resync and probe result changes, handing statuses to a StatusWriter
//     (podsync/status). Admission (Options.Admit) and eviction (Engine.Evict,
//     Engine.ActivePods) plug in.
//
// The pod-side parts that are not pod sync itself stay below podsync, as
// sub-packages, because each serves the pods podsync runs and the fixed top
// level holds no other place for them: podsync/status (the status writer),
// podsync/admission, podsync/eviction, podsync/volume (pod data),
// podsync/logrotate and podsync/nodeapi (the kubelet's port), as the
// kubelet keeps them beside its pod workers (pkg/kubelet/status, lifecycle,
// eviction, volumemanager, logs, server).
//
// # Usage
//
//	engine, _ := podsync.New(podsync.Options{
//		Syncer:  syncer,           // a PodSyncer (and Relister)
//		Writer:  writer,           // nil: nothing written
//		Updates: merger.Updates(), // podsource.Merger
//		Sources: []string{podsource.FileSource, podsource.APISource},
//	})
//	go engine.Run(ctx)
//
// A pod's worker is Syncing until the pod is deleted, removed from its
// source or terminal; then Terminating (SyncTerminatingPod with the pod's
// grace period, PodGracePeriod); then Terminated (SyncTerminatedPod once, a
// final status); then Done until REMOVE forgets it. Pods the backend runs
// but no source knows (orphans) are stopped with a 1s grace once the engine
// has handled an update from every source in Options.Sources, so a
// restarted agent adopts what runs. A pod a source sends while what runs of
// its UID is stopped for good (an orphan, or a pod removed and sent again)
// starts afresh once that is stopped, as the kubelet restarts it.
//
// # Timing
//
// SyncOnce is the step Run loops: it relists when a relist is due
// (RelistNow forces one), starts every due sync (at most MaxParallel at
// once, stopping pods not counted; a freed slot goes to a pod's first sync
// before any other, so a new pod on a full node waits for one sync to end,
// not for every resync or restart queued before it), waits for them and
// says when to step next. Syncs of one pod never overlap; the latest
// update wins. While the last relist failed no pod is synced. A failed
// sync is retried after ErrorBackoff (10s), others after ResyncPeriod
// ×[1, 1.5). Crash-loop back-off is 10s doubling to 5m, returned as
// "requeue after". Without events the engine relists every RelistPeriod
// (1s); with an EventWatcher an event relists its pod alone and the full
// relist slows to EventedRelistPeriod (300s). A sync that changed what runs has its pod
// observed at once: alone (RelistPod) with a PodRelister, else by a full
// relist; a step with more than four pods to observe (events or changes)
// relists in full instead, so that a burst on a busy runtime costs one
// relist, not two calls a pod. A RECONCILE update (the pod's status
// alone changed in its source) only replaces the engine's copy of the pod,
// as the kubelet's pod manager takes it, unless the pod has readiness
// gates; once that copy shows the status the engine published, the engine
// holds the copy's status, not its own. Figures are in BENCHMARKS.md. A
// pod with activeDeadlineSeconds is synced again when that long has passed
// since its start time (by
// Options.Clock) and stopped as the kubelet stops it:
// Failed, ReasonDeadlineExceeded, MessageDeadlineExceeded.
//
// # Differences from the kubelet
//
//   - The engine does not evict on its own (podsync/eviction, beside it);
//     admission is only with Options.Admit, and pods already stopping for a
//     preemption still count as active.
//   - Container events are used by default where the backend has them (the
//     kubelet's EventedPLEG is alpha), and a failed stream is retried (1s
//     doubling to 1m) for as long as Run runs.
//   - In crash-loop back-off a container shows waiting (CrashLoopBackOff)
//     from its exit on; the kubelet shows the exit until a sync of the pod
//     falls within the back-off, so mostly the exit while back-offs are
//     short.
//   - Pod-level status.resources are the pod's effective requests and
//     limits; the kubelet reads a running pod's back from its cgroup (no
//     memory limit reads as the cgroup's maximum, a cgroup gone as none).
//   - The CRI backend's differences are in podsync/cri's documentation.
package podsync
