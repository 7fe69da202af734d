// Package podsync makes a container runtime match the desired pods and
// computes their status, as the kubelet's pod workers, kuberuntime manager
// and status generator do, split so that each part can be used and tested
// alone.
//
// # Parts
//
//   - ComputePodActions, the pure planner: desired pod + observed PodState +
//     probe results + clock and crash-loop back-off → PodActions. No I/O.
//   - GeneratePodStatus, the pure status generator: phase, conditions,
//     container statuses, IPs, start time, QoS class.
//   - PodSyncer, the pod-level seam with the kubelet's three calls (SyncPod,
//     SyncTerminatingPod, SyncTerminatedPod), and Relister, which observes a
//     backend. NewCRI implements both on a runtime.Runtime, kubelet-exact;
//     podsync/podsynctest simulates pods; a virtual node plugs in its own.
//   - Engine: one worker per pod UID fed by podsource.Update, a relist, a
//     resync and probe result changes, handing statuses to a StatusWriter
//     (podsync/status writes them to the API server).
//   - Admission (Options.Admit, an admission.Admitter; podsync/admission has
//     kubelet's predicates): a pod new to the engine is offered, oldest
//     first by creation time within an update, with the admitted pods that
//     run or stop. A rejected pod never runs: its worker is Done at once,
//     its status is phase Failed with kubelet's reason and "Pod was
//     rejected: " and the message, a Warning event carries the reason, and
//     kubelet_admission_rejections_total{reason} counts it; once its
//     deletion begins the writer deletes it for good. A pod admitted by
//     preemption (admission.Result.Preempt: a critical pod that lacked only
//     resources) has the pods named there stopped first, as kubelet's
//     critical-pod admission stops them: each with its own grace period,
//     admission.PreemptedStatus laid over its status as an eviction's is
//     (the DisruptionTarget condition at once; Failed, reason Preempting,
//     "Preempted in order to admit critical pod" once stopped), a Warning
//     Preempting event and kubelet_preemptions{preemption_signal} counting
//     it. The admitted pod's first sync waits until they are Terminated,
//     or at most the longest of their grace periods × 1.5 (at least 10s),
//     where kubelet's admission blocks for each kill in turn.
//   - Eviction (Engine.Evict, with eviction.Killer's signature, and
//     Engine.ActivePods, the admitted pods whose worker is Syncing or
//     Terminating: podsync/eviction's Killer and ActivePods): an evicted
//     pod is terminated with the grace given (a shorter one restarts a
//     termination in progress), the status the eviction manager passes is
//     laid over what the engine generates (its conditions, the
//     DisruptionTarget condition, at once; its phase Failed, reason
//     Evicted and message once the containers are stopped, the final
//     status), and its worker ends Done like any other, so a later update
//     never starts it again. Evict returns at once; a pod the engine does
//     not run (unknown, orphan, rejected, Terminated or Done) is an error
//     wrapping ErrPodNotActive.
//
// # Lifecycle
//
// A pod's worker is Syncing until the pod has a deletion timestamp, is
// removed from its source, or its phase is terminal (Succeeded or Failed);
// then Terminating (SyncTerminatingPod with the pod's grace period, until it
// returns nil); then Terminated (at once in the same sync when the Relister
// is a PodRelister: the pod is read alone, as the kubelet does after killing
// a pod, instead of waiting for the next relist) (SyncTerminatedPod once, a final status with
// Terminated set, StatusWriter.PodTerminated); then Done, when later updates
// are ignored, until REMOVE forgets the pod (StatusWriter.RemovePod). A pod
// that becomes terminating while SyncPod runs has that sync cancelled. The
// grace period is deletionGracePeriodSeconds, else the spec's
// terminationGracePeriodSeconds (30 when unset), at least 1s, and only
// shrinks. Pods that run in the backend but that no source knows (orphans)
// are stopped with a 1s grace and removed once Options.SourcesReady reports
// true and an update of every source in Options.Sources was handled (with
// container events in use, the next health check after that relists, so
// they are found within RelistPeriod, not at the next full relist). The CRI
// syncer never touches a sandbox or container without the
// io.kubernetes.pod.uid label (containers also need io.kubernetes.container.name).
//
// # Action rules (ComputePodActions)
//
//   - A new sandbox when there is none (attempt 0), more than one is ready,
//     the newest is not ready, its network mode differs from hostNetwork, or a
//     pod-network sandbox has no IP (attempt = newest + 1). The pod is killed
//     first and every container starts again: the first init container, or
//     every regular container (under OnFailure, not those that exited 0). Not
//     under restartPolicy Never once containers ran, nor when nothing would
//     start.
//   - Init containers in order: one that exited 0 is done; a failed one
//     (non-zero exit, OOMKilled, unknown) kills the pod under Never and is
//     restarted otherwise; a running one is waited for. Sidecars (init
//     containers with restartPolicy Always) are started in order, the next
//     init container only once the sidecar is running and its startup probe
//     succeeded, and are kept running (restarted on exit, hash change,
//     liveness or startup failure). Once a regular container has run, init
//     containers are not run again.
//   - Regular containers: a running one is killed and recreated when its hash
//     changes, killed on a liveness or startup probe Failure for its own
//     container ID (and recreated unless the policy is Never); one that is not
//     running is started when it never ran, is created or unknown, or exited
//     and its first matching restartPolicyRules entry says so, else its own
//     restartPolicy, else the pod's, allows (Always; OnFailure on failure).
//   - An exited container waits out its crash-loop back-off (10s doubling to
//     5m, counted from its finish, forgotten 10m after the last back-off) under
//     the key CrashLoopKey (FNV-64a of pod name, namespace, UID, container name,
//     image and resources). The first restart after an exit is immediate.
//   - Ephemeral containers start once each, in the running sandbox, before
//     init and regular containers (never while a sandbox is being created),
//     sharing the process namespace of their target container when it runs;
//     they are never restarted and keep no pod alive.
//   - Nothing running is kept and nothing is to start: the pod is killed.
//   - Stray running containers (older instances, names not in the spec) are killed.
//
// # The container hash
//
// HashContainer is the kubelet's: FNV-32a over go-spew's %#v rendering of the
// JSON {"image":…,"name":…}, in hex ("e324a2d6" for app and nginx:1.25). Only
// the name and the image count: a change of command, env, resources or
// probes does not recreate a running container (pods' specs are immutable
// but for images). The hash, restart count, termination-message settings,
// preStop handler, ports and grace periods are written as the kubelet's
// io.kubernetes.* annotations, so a restarted engine (or a kubelet) adopts
// what runs: same container IDs, restart counts from the annotations.
// A start that an agent's stop cut short is finished, not counted as a
// restart (the kubelet counts it): a container created for the spec but
// never started is started as it is, and one an earlier agent created
// whose start the runtime aborted (exited, never started) is replaced at
// the same restart count, so no second container of the name is left.
// Meanwhile its status says it waits to be created (ContainerCreating),
// not that it exited, so the pod does not turn Running and then Pending
// again; and a start of it that the runtime refuses while the earlier
// agent's start is still in flight (for up to a minute after the syncer
// started) is not reported as an error: the relist sees how that start
// ends.
//
// # Threading model
//
// While the last relist failed, no pod is synced (the kubelet pauses its
// sync loop while the runtime is unhealthy); syncs resume after the next
// relist that succeeds.
//
// HandleUpdate, Trigger, PodStatus, PodLifecycle and State may be called
// from any goroutine. SyncOnce relists, starts a sync for every pod that is
// due (at most MaxParallel at once, pods being stopped not counted, as the
// kubelet bounds none; each on its own goroutine), waits for
// them and returns how long to wait before the next step; Run does the same without waiting, relists RelistPeriod after the
// last relist (EventedRelistPeriod while container events are in use) or
// at once after a sync that changed what runs, reads
// Options.Updates and probe updates, and returns nil when its context ends,
// after the syncs in flight return. Syncs of one pod never overlap; an
// update that arrives during a sync makes the pod due again when it ends
// (the latest update wins). A relist that sees a pod's state change
// publishes the pod's new status at once unless a sync of it holds a slot,
// so a started container is reported without waiting for a free slot; a
// sync takes the pod, its observed state and its last status when it gets
// its slot, not when it was queued. A sync that failed is retried after
// ErrorBackoff (10s), one that waits for a back-off when it ends, others
// after ResyncPeriod ×[1, 1.5).
//
// # Observation: relist and container events
//
// Without events the engine relists every RelistPeriod (1s, kubelet's
// generic PLEG). When the Relister is also an EventWatcher (the CRI syncer
// is, and streams the runtime's CRI container events where the runtime
// has them: containerd 2, not 1.6), Run keeps a stream open on its own
// goroutine, as kubelet's evented PLEG does. An event names its pod (the
// io.kubernetes.pod.uid label of the event's sandbox status, or the
// sandbox or container ID in the last observation) and Run relists that
// pod alone at once (RelistPod; the whole backend when the Relister is not
// a PodRelister), so its worker wakes without waiting for a relist; a sync
// that changed what runs also relists just its pod. Once the stream has
// delivered an event or stayed open for a RelistPeriod, the next relist
// schedules the one after EventedRelistPeriod (300s, kubelet's evented
// PLEG) and the backend's health is checked every RelistPeriod in between
// (HealthChecker: the CRI syncer asks the runtime's Status, so
// LatestRuntimeStatus stays fresh; a failure relists at once). When the
// stream fails or ends (a runtime restart), the engine relists at once and
// every RelistPeriod again, and opens a new stream after 1s doubling to 1m
// (afresh after a stream that lasted 1m); the failure is logged once at
// Info, retries that fail again at V(4), and "Container events in use"
// once when events take over again. A backend without events
// (ErrNoEvents: the runtime answers Unimplemented) is asked once per Run
// and relisted every RelistPeriod from then on. SyncOnce always relists
// everything; events are Run's.
//
// # The CRI syncer
//
// NewCRI builds sandbox and container configs as the kubelet does: labels,
// annotations, log paths <PodLogRoot>/<ns>_<name>_<uid>/<container>/<restartCount>.log,
// hostname, DNS (ClusterDNS/ClusterDomain or the node's resolv.conf),
// namespaces, port mappings, cgroup parent per QoS class and driver,
// resources (shares, quota, memory limit, oom_score_adj), security context,
// command, args and env with $(VAR) expansion and downward-API fieldRefs the
// node can answer, emptyDir and hostPath volumes (with the kubelet's type
// checks), subPath and subPathExpr mounts (below), the pod's /etc/hosts
// (<PodRoot>/<uid>/etc-hosts: the kubelet's managed entries with the pod's
// IPs, hostname and FQDN, or the node's hosts file for host-network pods,
// then hostAliases; not when the container mounts its own /etc/hosts or a
// pod-network pod has no IP yet) and the termination-message file. With
// CRIOptions.PodData (podsync/volume's Manager) it also serves Secret,
// ConfigMap, downward-API, projected and memory emptyDir volumes (mounted
// read-only but for emptyDir), env from ConfigMaps, Secrets, resources and
// Services, and pull credentials: SyncPod first calls PodData.SetUpPod (an
// error returns before anything runs; the pod is retried), and
// SyncTerminatedPod removes the pod directory through PodData.TearDownPod.
// A pod's log directory outlives its containers (a completed pod's logs stay
// readable) and goes when the engine forgets the pod, once no source has it
// (PodCleaner; a removal that fails, say because a log rotation wrote into
// the directory meanwhile, is tried again ErrorBackoff later). Log
// directories of pods deleted while no engine ran stay.
// A volumeMount's subPath (or subPathExpr, expanded from the container's
// env with $(VAR); an unset or empty variable is "missing value for VAR")
// is mounted as the kubelet mounts it: it must be relative and without
// "..", symlinks in it may lead only inside the volume, a missing subPath
// is made as directories with the volume's mode, and the resolved path is
// opened element by element without following symlinks and that open file
// bind-mounted at <PodRoot>/<uid>/volume-subpaths/<volume>/<container>/<mount
// index>, which the runtime is given (so a container that swaps in a
// symlink after the check gains nothing). A bad subPath is
// CreateContainerConfigError with the kubelet's message naming it ("error
// SubPath `/etc` must not be an absolute path", "unable to provision
// SubPath `a/../b`: must not contain '..'", "failed to prepare subPath for
// volumeMount "data" of container "app": subPath `link` resolves outside
// its volume"). A restarted container reuses its mounts;
// SyncTerminatedPod unmounts them all before it removes the pod directory,
// and removes nothing while a mount is left.
// Env follows the kubelet's precedence: envFrom, then env in order (each
// $(VAR) sees envFrom, earlier env and the service variables), then the
// service variables the container does not set. Images are pulled per
// imagePullPolicy with the kubelet's pull back-off (key <podUID>_<image>,
// 10s doubling to 5m), one at a time unless CRIOptions.MaxParallelImagePulls
// says otherwise. Pod-network pods wait while the runtime reports
// NetworkReady false (ErrNetworkNotReady, retried after 1s). Every relist
// asks the runtime for its status; LatestRuntimeStatus returns the last
// answer and when it came, so nodestatus (Options.RuntimeStatus) can report
// the node's readiness from it without polling the runtime a second time. Termination
// messages come from the file mounted at terminationMessagePath (4 KiB) or,
// under FallbackToLogsOnError after a failure, from the log's last 80 lines
// (2 KiB). postStart hooks run after start (a failure kills the
// container: PostStartHookError); exec hooks through the runtime, HTTP GET
// hooks (User-Agent kube-lifecycle/1.37) to the pod's IP unless the hook
// names a host, successful on any response whatever its status, as the
// kubelet's; preStop hooks run before a stop, their
// time taken off the grace period, StopContainer getting at least 2s. A pod
// stops its regular containers in parallel first, then its init containers
// and sidecars one at a time in reverse order, within one grace period. It
// records the kubelet's events through CRIOptions.Recorder and counts
// kubelet_runtime_operations_errors_total; the Engine exports
// kubelet_pod_start_duration_seconds, kubelet_pod_worker_duration_seconds
// (operation_type create or sync), kubelet_running_pods and
// kubelet_running_containers{container_state}. Unhealthy events come from
// probe.Manager's own Recorder.
//
// With CRIOptions.CgroupsPerQOS (the kubelet's cgroupsPerQOS) the syncer
// keeps the pod-level cgroups on the cgroupfs driver, cgroup v1 or v2:
// <CgroupRoot>/kubepods with burstable (CPU shares: the sum of its pods' CPU
// requests) and besteffort (minimum shares) below it, and a pod<uid> cgroup
// per pod with the pod's CPU shares, a CFS quota when every container has a
// CPU limit and a memory limit when every container has one (sums over the
// containers and sidecars, or the largest init container's), created before
// the sandbox and removed by SyncTerminatedPod.
//
// # Differences from the kubelet
//
//   - Pod-level cgroups only with CgroupsPerQOS on the cgroupfs driver; no
//     node-allocatable enforcement on kubepods, no pids limit, no hugetlb;
//     the QoS cgroups are set when pods come and go, not also every minute.
//     The Engine does not evict on its own: podsync/eviction is kubelet's
//     eviction manager, which an agent runs beside it with the Engine as
//     its Killer and Engine.ActivePods as its pods. Admission is kubelet's predicates
//     (podsync/admission) and, chained before them, the eviction rule
//     (podsync/eviction), only with Options.Admit. Pods already stopping
//     for an earlier preemption still count as active, so a second critical
//     pod admitted meanwhile may choose them again (kubelet admits one pod at
//     a time after its victims are gone).
//   - Volumes without PodData: emptyDir (on disk, also for medium Memory)
//     and hostPath only; other volumes, envFrom and env from ConfigMaps,
//     Secrets or resources are CreateContainerConfigError. With
//     podsync/volume, its package documentation lists what differs. CSI,
//     persistent and network volumes are not served.
//   - In-place resize is not handled; the
//     RestartAllContainers rule action restarts only the container, and the
//     phase follows the pod's restartPolicy alone. Pull secrets are used
//     only through PodData (one credential per pull); credential providers
//     are not used.
//   - Old containers are removed when they are no longer the newest exited
//     one of their name (or were created and never started), and
//     SyncTerminatedPod removes the pod's containers and sandboxes from the
//     runtime at once, instead of a periodic GC.
//   - The relist fetches a container's status only when its state changed;
//     there is no PLEG health check beyond pausing syncs after a failed relist.
//   - Container events are used by default where the runtime has them
//     (kubelet's EventedPLEG is an alpha feature, off by default); an event
//     relists its pod through the runtime instead of taking the statuses
//     the event carries, and a failed stream is retried with back-off for as
//     long as Run runs instead of giving up after 5 attempts.
//   - Seccomp defaults to Unconfined unless CRIOptions.SeccompDefault, as the
//     kubelet's seccompDefault; for systemd, the cgroup parent is the slice
//     name alone.
package podsync
