// Package podsync is the backend-neutral core of the pod half: it makes a
// backend match the desired pods and computes their status, as the
// kubelet's pod workers and status generator do, split so that each part
// can be used and tested alone. It links no CRI, cgroup or mount code.
//
// # Parts
//
//   - ComputePodActions, the pure planner: desired pod + observed PodState +
//     probe results + clock and crash-loop back-off → PodActions. No I/O.
//   - GeneratePodStatus, the pure status generator: phase, conditions,
//     container statuses, IPs, start time, QoS class.
//   - PodSyncer, the pod-level seam with the kubelet's three calls (SyncPod,
//     SyncTerminatingPod, SyncTerminatedPod), and Relister, which observes a
//     backend. podsync/cri implements both on a runtime.Runtime,
//     kubelet-exact; podsync/podsynctest simulates pods; a virtual node
//     plugs in its own (SyncerFuncs adapts functions).
//   - Engine: one worker per pod UID fed by podsource.Update, a relist, a
//     resync and probe result changes, handing statuses to a StatusWriter
//     (podsync/status writes them to the API server).
//   - Admission (Options.Admit; podsync/admission has kubelet's
//     predicates): a new pod is offered oldest first; a rejected pod never
//     runs (phase Failed, "Pod was rejected: ", a Warning event,
//     kubelet_admission_rejections_total). A critical pod admitted by
//     preemption has the pods named in admission.Result.Preempt stopped
//     first (kubelet_preemptions), and waits for them at most their longest
//     grace × 1.5 (at least 10s).
//   - Eviction (Engine.Evict and Engine.ActivePods, podsync/eviction's
//     Killer and pods): the pod is terminated with the grace given and the
//     eviction's status laid over the generated one; a pod not run is
//     ErrPodNotActive.
//
// # Lifecycle
//
// A pod's worker is Syncing until the pod has a deletion timestamp, is
// removed from its source, or its phase is terminal; then Terminating
// (SyncTerminatingPod with the pod's grace period, PodGracePeriod, until it
// returns nil); then Terminated (SyncTerminatedPod once, a final status,
// StatusWriter.PodTerminated; at once when the Relister is a PodRelister);
// then Done until REMOVE forgets the pod (StatusWriter.RemovePod, and
// PodCleaner's CleanupPod, retried ErrorBackoff later when it fails). Pods
// the backend runs but no source knows (orphans) are stopped with a 1s
// grace once the engine has handled an update from every source in
// Options.Sources.
//
// # Action rules (ComputePodActions)
//
// A new sandbox when there is none, several are ready, the newest is not
// ready, its network mode changed or a pod-network sandbox lacks an IP.
// Init containers run in order; sidecars (IsSidecar) start in order and
// keep running. A regular container is recreated when its HashContainer
// changes, killed on a liveness or startup Failure, and restarted per
// restartPolicyRules, its own restartPolicy or the pod's. An exited
// container waits out its crash-loop back-off (10s doubling to 5m) under
// CrashLoopKey; the first restart after an exit is immediate. Ephemeral
// containers start once each. Stray containers are killed.
//
// # Threading and timing
//
// HandleUpdate, Trigger, PodStatus, PodLifecycle and State may be called
// from any goroutine. SyncOnce relists, starts every due sync (at most
// MaxParallel at once, stopping pods not counted), waits for them and says
// when to step next; Run does the same without waiting and returns nil when
// its context ends. Syncs of one pod never overlap; the latest update wins.
// While the last relist failed no pod is synced. A failed sync is retried
// after ErrorBackoff (10s), others after ResyncPeriod ×[1, 1.5). Without
// events the engine relists every RelistPeriod (1s). When the Relister is
// an EventWatcher, Run keeps a stream of PodEvents open: an event relists
// its pod alone (RelistPod), the full relist slows to EventedRelistPeriod
// (300s) and a HealthChecker is asked every RelistPeriod; a failed stream
// is retried after 1s doubling to 1m, and ErrNoEvents turns events off.
// The engine exports kubelet_pod_start_duration_seconds,
// kubelet_pod_worker_duration_seconds, kubelet_running_pods and
// kubelet_running_containers.
//
// # Differences from the kubelet
//
// The engine does not evict on its own (run podsync/eviction beside it);
// admission is only with Options.Admit, and pods already stopping for a
// preemption still count as active. Container events are used by default
// where the backend has them (kubelet's EventedPLEG is alpha) and a failed
// stream is retried for as long as Run runs. The CRI backend's differences
// are in podsync/cri's documentation.
package podsync
