// Package cri is podsync's CRI backend, the kubelet's kuberuntime part: a
// podsync.PodSyncer, PodRelister, PodCleaner, EventWatcher and
// HealthChecker on a runtime.Runtime, kubelet-exact, so crictl shows what
// it shows and a restarted agent (or a kubelet) adopts what runs.
//
//	syncer, _ := cri.New(cri.Options{Runtime: rt, NodeName: node, HostIPs: ips})
//	engine, _ := podsync.New(podsync.Options{Syncer: syncer, ...})
//
// # Configs
//
// New's Syncer builds sandbox and container configs as the kubelet does:
// labels and annotations (LabelPodUID and the rest; the syncer never touches
// a sandbox or container without io.kubernetes.pod.uid), log paths
// <PodLogRoot>/<ns>_<name>_<uid>/<container>/<restartCount>.log
// (podsync.PodLogDir), hostname, DNS (ClusterDNS/ClusterDomain or the node's
// resolv.conf), namespaces, port mappings, cgroup parent per QoS class and
// driver (PodCgroupParent), resources and oom_score_adj, the security
// context (below), env with $(VAR) expansion and downward-API fieldRefs, emptyDir and
// hostPath volumes, subPath and subPathExpr mounts, the pod's /etc/hosts and
// the termination-message file. A pod's runtimeClassName is resolved
// through Options.RuntimeClasses (podsync/runtimeclass) to the handler
// RunPodSandbox gets; a class not found, or a sandbox the handler cannot
// run, is the kubelet's FailedCreatePodSandBox event and the pod stays
// Pending, retried. With Options.PodData (podsync/volume's
// Manager) it also serves Secret, ConfigMap, downward-API and projected
// volumes, env from the API and pull credentials.
//
// The security context is the kubelet's: user, group and supplemental
// groups (with fsGroup and supplementalGroupsPolicy), capabilities as
// written (the runtime adds CAP_ and knows ALL), privileged, read-only
// root, no_new_privs from allowPrivilegeEscalation false, SELinux options,
// AppArmor (podsync/admission.AppArmorProfile; refused on a host without
// it), seccomp (a Localhost
// profile is a file below Options.SeccompProfileRoot; the sandbox always
// gets RuntimeDefault) and the masked and read-only /proc paths unless
// privileged or procMount Unmasked. runAsNonRoot is verified against
// runAsUser, else the user the runtime says the image runs as, with the
// kubelet's messages; a field podsync/admission refuses
// (UnsupportedField) is CreateContainerConfigError with its message, for
// pods the agent admitted without it and ephemeral containers.
//
// A subPath is mounted as the kubelet mounts it: relative, without "..",
// symlinks only inside the volume, opened element by element without
// following symlinks and that open file bind-mounted below
// <PodRoot>/<uid>/volume-subpaths (SubPathDir); a bad one is
// CreateContainerConfigError with the kubelet's message.
//
// # User namespaces
//
// A pod with spec.hostUsers false runs in a user namespace of its own
// (NamespaceOption.UsernsOptions mode POD, the sandbox and every
// container, and the containers' mounts with the same ID mappings, which
// the runtime makes ID-mapped mounts) when its runtime handler reports
// user namespaces in the runtime's status (containerd 2 with a runc that
// has ID-mapped mounts; never containerd 1.6, which reports no handlers);
// otherwise its sandbox fails with the kubelet's "can't set
// `spec.hostUsers: false`, ... does not support user namespaces". Its
// range, 65,536 IDs from the kubelet's (UserNamespaceOptions), is kept in
// <PodRoot>/<uid>/userns and freed with the pod's directory; other pods
// get mode NODE, as the kubelet sends it.
//
// # Running pods
//
// Images are pulled per imagePullPolicy with the kubelet's back-off (10s
// doubling to 5m), one at a time unless Options.MaxParallelImagePulls.
// Pod-network pods wait while the runtime reports NetworkReady false
// (ErrNetworkNotReady, retried after 1s). postStart hooks run after start
// (a failure kills the container; a tcpSocket hook fails, as the
// kubelet's); preStop hooks run before a stop, their
// time taken off the grace period, StopContainer getting at least 2s. A pod
// stops its regular containers in parallel, then its init containers and
// sidecars in reverse order. A start that an earlier agent's stop cut short
// is finished, not counted as a restart (it is one when the runtime will
// not remove the container left, as containerd 2 may refuse). Old
// containers are removed when no longer the newest exited one of their name
// (RemoveDeadContainers does it for all pods); SyncTerminatedPod removes the
// pod's containers, sandboxes, mounts and directory at once; a pod's log
// directory goes with CleanupPod. Termination messages come from
// terminationMessagePath (4 KiB) or, under FallbackToLogsOnError, the log's
// last 80 lines (2 KiB).
//
// # Observation
//
// Relist and RelistPod read sandboxes and containers, fetching a
// container's status only when its state changed. WatchEvents streams the
// runtime's CRI container events (containerd 2, not 1.6: podsync.ErrNoEvents)
// and CheckHealth asks the runtime's Status. Relists and checks ask it
// every Options.StatusPeriod (5s, the kubelet's runtime check) while the
// runtime and its network are ready, at every relist while they are not,
// and keep the answer: LatestRuntimeStatus gives it to nodestatus without
// a second poll. It records the kubelet's events through Options.Recorder and counts
// kubelet_runtime_operations_errors_total.
//
// # Cgroups
//
// With Options.CgroupsPerQOS the syncer keeps the pod-level cgroups on the
// cgroupfs driver, cgroup v1 or v2: <CgroupRoot>/kubepods with burstable and
// besteffort below it, and a pod<uid> cgroup with the pod's CPU shares,
// quota and memory limit, created before the sandbox and removed by
// SyncTerminatedPod, which first kills any process the runtime left in it,
// as the kubelet does. PodCgroupDirs and PodVolumeDirs serve nodestatus/usage.
//
// # Differences from the kubelet
//
//   - Pod-level cgroups only with CgroupsPerQOS on cgroupfs; no
//     node-allocatable enforcement, pids limit or hugetlb; QoS cgroups are
//     set when pods come and go. For systemd the cgroup parent is the slice.
//   - Without PodData only emptyDir and hostPath volumes; CSI, persistent and
//     network volumes are not served; credential providers are not used.
//   - No in-place resize; RestartAllContainers restarts only the container.
//   - Containers are removed at once instead of by a periodic GC.
//   - An event relists its pod instead of taking the statuses it carries.
//   - Seccomp defaults to Unconfined unless Options.SeccompDefault.
//   - Volumes are never SELinux-relabeled; recursiveReadOnly IfPossible
//     mounts read-only, not recursively (Enabled is refused).
//   - The image's user is not passed as runAsUser (the runtime applies
//     it), and privileged containers get no masked paths (the runtime
//     ignores them).
//   - Without PodData an emptyDir of medium Memory is
//     CreateContainerConfigError.
//   - Without Options.RuntimeClasses (no API server) a pod naming a
//     RuntimeClass fails as with a class not found; the kubelet without
//     an API client runs it on the default handler.
//   - A user namespace's range is freed when the pod's directory goes
//     (SyncTerminatedPod, CleanupPod), not by a housekeeping pass over the
//     directories of pods nobody knows.
package cri
