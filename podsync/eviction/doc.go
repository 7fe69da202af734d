// Package eviction is kubelet's node-pressure eviction manager as a
// library part: it watches the node's memory, disk and PIDs, reports
// MemoryPressure, DiskPressure and PIDPressure, rejects new pods under
// pressure, frees node-level resources (images, dead containers) and, when
// that is not enough, evicts one pod at a time, chosen by kubelet's ranking.
// nodekit.NewPodHalf builds one when its backend can be observed.
//
// # Usage
//
//	m, err := eviction.New(eviction.Options{
//		NodeName:   node,
//		Observer:   observer,          // one Snapshot per call
//		ActivePods: engine.ActivePods, // podsync: admitted, not terminated
//		Killer:     engine,            // podsync.Engine stops the pod, sets its status
//		Reclaimers: []eviction.Reclaimer{imageGC},
//		Recorder:   recorder, Registerer: reg,
//	})
//	go m.Run(ctx)
//	setters, _ = setters.Replace(nodestatus.SetterMemoryPressure, m.ConditionSetter(corev1.NodeMemoryPressure))
//	admit := m.Admit // an admission.Admitter, before podsync/admission's predicates
//
// FromSummary turns a kubelet stats Summary (what nodestatus/usage's
// Collector publishes, and /stats/summary serves) into a Snapshot; wrap it
// in an ObserverFunc. A Snapshot whose Time equals the last one's is stale
// and evicts nothing. ConditionSetter and Manager have
// nodestatus.StatusSetter's method, so they replace nodestatus's pressure
// setters without this package importing nodestatus.
//
// Thresholds take kubelet's settings in kubelet's syntax (ParseThresholds):
// EvictionHard (kubelet's Linux defaults), EvictionSoft with its grace
// periods, EvictionMinimumReclaim, PressureTransitionPeriod (5m) and
// MaxPodGracePeriod. A sync (SyncOnce) observes; sets the conditions; evicts
// at once every pod over an emptyDir sizeLimit or its ephemeral-storage
// limits; else, for a threshold met for its grace period, records
// EvictionThresholdMet, runs the Reclaimers for disk signals and observes
// again, and evicts the first non-critical pod by Rank, with kubelet's
// reason, message, annotations and DisruptionTarget condition.
// Eviction admission (Manager.Admit) rejects BestEffort pods under
// MemoryPressure and every pod under DiskPressure or PIDPressure, critical
// pods never. ImageGC is kubelet's image manager: unused, unpinned images
// at least MinAge (2m) old, least recently used first.
//
// # Timing
//
// Run syncs every Period (10s); with Options.PodCleanedUp it polls an
// evicted pod's cleanup every second for up to 30s and syncs again at once.
// At most one pod is evicted per sync. ImageGC.Run collects every 5m from
// HighThresholdPercent (85) down to LowThresholdPercent (80). The cost of a
// sync is in BENCHMARKS.md.
//
// # Limits
//
//   - Stats are the Observer's: from nodestatus/usage there are no system
//     containers, so allocatableMemory.available is not observed, and pods'
//     local volumes count only when the Summary has them.
//   - No memcg threshold notifications: memory is checked every Period.
//   - No split containerfs signals; no dead-container reclaimer of its own
//     (cri.Syncer.RemoveDeadContainers is one, run before ImageGC).
//     Preempting pods for a critical one is podsync/admission's.
//
// # Differences from the kubelet
//
//   - A Summary does not say which device a file system is on: FromSummary
//     takes the image file system as dedicated when its capacity differs
//     from the node file system's (set DedicatedImageFS when the agent
//     knows better); the kubelet compares devices.
//   - The pressure conditions are listed in a fixed order (kubelet's comes
//     from a map), which shows in the admission message.
//   - Snapshot.Time is one time for all signals; the kubelet tracks each
//     signal's.
package eviction
