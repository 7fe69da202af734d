// Package eviction is kubelet's node-pressure eviction manager as a
// library part: it watches the node's memory, disk and PIDs, reports
// MemoryPressure, DiskPressure and PIDPressure, rejects new pods under
// pressure, frees node-level resources (images) and, when that is not
// enough, evicts one pod at a time, chosen by kubelet's ranking.
//
// # Usage
//
// A Manager takes an Observer (the node's and the pods' usage, one
// Snapshot per call), the active pods, a Killer (the agent's pod workers)
// and optional Reclaimers (ImageGC, a dead-container collector):
//
//	m, err := eviction.New(eviction.Options{
//		NodeName:   node,
//		Observer:   observer,              // FromSummary of the agent's stats
//		ActivePods: engine.ActivePods,     // podsync: admitted, not terminated
//		Killer:     engine,                // podsync.Engine: stops the pod, sets its status
//		Reclaimers: []eviction.Reclaimer{imageGC},
//		Recorder:   recorder,
//		Registerer: registry,
//	})
//	go m.Run(ctx)                                  // SyncOnce every 10s
//	setters, _ = setters.Replace(nodestatus.SetterMemoryPressure, m.ConditionSetter(corev1.NodeMemoryPressure))
//	admit := m.Admit                               // before podsync/admission's predicates
//
// ConditionSetter and Manager have nodestatus.StatusSetter's method
// (SetStatus), so they take the place of nodestatus's own pressure setters
// without this package importing nodestatus; Manager is an
// admission.Admitter.
//
// # Observing kubelet's stats Summary
//
// FromSummary turns a stats Summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1,
// what /stats/summary serves) into a Snapshot, as kubelet's eviction
// manager reads its summary provider: node memory, the "pods" system
// container's memory, Node.Fs, the runtime's ImageFs, the rlimit's PIDs and
// each pod's memory, disk, inodes and processes; a missing part leaves its
// signals unobserved. nodestatus/usage's Collector publishes such a
// Summary; an agent wires its last sample in without this package
// importing it:
//
//	observer := eviction.ObserverFunc(func(context.Context) (*eviction.Snapshot, error) {
//		snap := collector.Latest() // *usage.Snapshot, nil before the first sample
//		if snap == nil {
//			return nil, errors.New("no usage sample yet")
//		}
//		return eviction.FromSummary(snap.Time, snap.Summary), nil
//	})
//
// The sample's Time is the Snapshot's, so a sample taken once and observed
// twice is seen as stale and evicts nothing the second time. A Summary does
// not say which device a file system is on: FromSummary takes the image
// file system as dedicated when its capacity (bytes, or inodes) differs
// from the node file system's, where kubelet compares devices (set
// DedicatedImageFS on the result when the agent knows better).
//
// # Signals and thresholds
//
// memory.available and allocatableMemory.available (available of
// available+working set), nodefs.available, nodefs.inodesFree,
// imagefs.available, imagefs.inodesFree and pid.available (pid_max less
// running processes). A signal whose part of the Snapshot is nil is not
// observed and its thresholds are not met. Options take kubelet's settings
// in kubelet's syntax (ParseThresholds): EvictionHard (default, Linux:
// memory.available 100Mi, nodefs.available 10%, nodefs.inodesFree 5%,
// imagefs.available 15%, imagefs.inodesFree 5%), EvictionSoft with
// EvictionSoftGracePeriod, EvictionMinimumReclaim, PressureTransitionPeriod
// (5m) and MaxPodGracePeriod (0). A threshold is met while what is
// available is less than it (a percentage is of the signal's capacity,
// computed in float32 as kubelet does); once it drove an eviction it stays
// met until its minimum reclaim is available beyond it.
//
// # A sync (SyncOnce)
//
//  1. Observe; an error returns with nothing changed.
//  2. The thresholds met, grace periods aside, decide the conditions: a
//     condition holds while a threshold of its signal was met within the
//     transition period (so a soft threshold reports pressure at once,
//     before its grace period, as kubelet's does). The readers (State,
//     IsUnder*Pressure, ConditionSetter, Admit) see them at once.
//  3. Local storage limits (unless Options.IgnoreLocalStorageLimits, which
//     is kubelet's localStorageCapacityIsolation: false): every active pod
//     with an emptyDir over its sizeLimit, else over the sum of its
//     containers' ephemeral-storage limits (writable layers, logs and
//     local volumes: PodUsage), else with a container over its own (its
//     logs, and its writable layer unless the image file system is
//     dedicated) is evicted at once, grace period 1s, with kubelet's
//     message ("Usage of EmptyDir volume "scratch" exceeds the limit
//     "100Mi". ", "Pod ephemeral local storage usage exceeds the total
//     limit of containers 20Mi. ", "Container app exceeded its local
//     ephemeral storage limit "20Mi". ") and, as kubelet, no
//     DisruptionTarget condition; critical pods are not. A sync that
//     evicts for a limit does nothing more.
//  4. The thresholds met for their grace period drive evictions, memory
//     signals first. Nothing more happens when none is, or when the
//     snapshot's Time equals the last one's (stale stats).
//  5. A Warning EvictionThresholdMet event ("Attempting to reclaim
//     memory") on the node.
//  6. For a disk signal, the Reclaimers run (not for nodefs signals when
//     the image file system is dedicated: image and container GC free
//     only that one), then the node is observed again;
//     when no threshold is met with its minimum reclaim, the sync ends.
//  7. The active pods are ranked (Rank) and the first that is not critical
//     (static, mirror, or priority ≥ 2000000000) is evicted: at most one
//     pod per sync. Its Killer gets phase Failed, reason Evicted, kubelet's
//     message ("The node was low on resource: memory. Threshold quantity:
//     100Mi, available: 50Mi. Container app was using 200Mi, request is
//     100Mi, has larger consumption of memory. ") and the DisruptionTarget
//     condition (reason TerminationByKubelet); the grace period is 1s for a
//     hard threshold, MaxPodGracePeriod for a soft one (or the pod's
//     terminationGracePeriodSeconds when shorter). A Warning Evicted event
//     on the pod carries the message and kubelet's annotations
//     (offending_containers, offending_containers_usage, starved_resource);
//     kubelet_evictions{eviction_signal} counts it, even when the Killer
//     fails (as kubelet counts it), and
//     kubelet_eviction_stats_age_seconds{eviction_signal} observes how old
//     the stats were.
//
// Ranking: memory — pods whose working set exceeds their memory request,
// then lower priority, then larger use above the request; nodefs and
// imagefs — disk use over the ephemeral-storage request (inodes: any use),
// priority, use above the request (with a dedicated image file system,
// imagefs counts writable layers, nodefs logs and local volumes; else both
// count all three); pid.available — priority, then process count. A pod
// without usage in the snapshot goes first at each step that compares
// usage. Requests are the scheduler's (sidecars, the largest init
// container, overhead, pod-level requests).
//
// Run syncs every Period (10s); with Options.PodCleanedUp, after an
// eviction it polls it every second for up to 30s and syncs again at once,
// as kubelet waits for an evicted pod's cleanup.
//
// # Conditions and admission
//
// ConditionSetter writes MemoryPressure (KubeletHasInsufficientMemory /
// KubeletHasSufficientMemory), DiskPressure (KubeletHasDiskPressure /
// KubeletHasNoDiskPressure) and PIDPressure (KubeletHasInsufficientPID /
// KubeletHasSufficientPID) with kubelet's messages, and records kubelet's
// Normal event on a change ("Node n status is now: NodeHasDiskPressure").
// AdmitUnderPressure (Manager.Admit) is kubelet's eviction admission:
// under MemoryPressure alone only BestEffort pods that do not tolerate the
// memory-pressure taint are rejected; under DiskPressure or PIDPressure
// every pod is; critical pods never are. Rejections have reason Evicted
// and the message "The node had condition: [DiskPressure]. ".
//
// # Image garbage collection
//
// ImageGC is kubelet's image manager: it tracks when each image was first
// seen and last used by a container, and removes images no container uses,
// that are not pinned (by the runtime or ImageGCOptions.PinnedImages, the
// sandbox image) and were first seen at least MinAge (2m) ago, least
// recently used first. As a Reclaimer it removes all of them (kubelet's
// DeleteUnusedImages); GarbageCollect (Run, every 5m) frees space when the
// image file system is at or above HighThresholdPercent (85) down to
// LowThresholdPercent (80). It is tested on runtime/runtimetest and, end
// to end, on a private containerd (e2e_test.go).
//
// # Limits
//
//   - Stats come from the Observer (FromSummary of nodestatus/usage's
//     samples, for one): nodestatus/usage reports no system containers, so
//     allocatableMemory.available is not observed from it, and pods' local
//     volumes count only when the Summary has them (usage.Options.PodVolumeDirs). There are no memcg
//     threshold notifications: memory is checked every Period only.
//   - No split containerfs signals, and no dead-container reclaimer of its
//     own: cri.Syncer.RemoveDeadContainers is one (examples/agent runs it
//     before ImageGC, as kubelet runs its container GC before its image
//     GC). Preempting pods to admit a critical one is podsync/admission's
//     (Predicates) and the Engine's.
//   - A pod's limit is the sum of its containers' (kubelet's PodLimits,
//     from k8s.io/component-helpers), read from the pod as admitted.
//   - The pressure conditions are listed in a fixed order (kubelet's comes
//     from a map), which shows in the admission message.
//   - Snapshot.Time is one time for all signals; kubelet tracks each
//     signal's.
package eviction
