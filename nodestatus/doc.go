// Package nodestatus computes a Node's status from the host and the container
// runtime, the way kubelet does, as an ordered list of named setters that a
// user can edit.
//
// # Setters
//
// A StatusSetter sets its part of a *corev1.Node's status in place and owns
// what it sets: it never touches fields or condition types it does not own,
// so conditions written by other agents (node-problem-detector) survive.
// Setters is an ordered list of Named setters; it is itself a StatusSetter
// that runs every setter, even after one fails, and returns the failures
// joined, each a *SetterError naming its setter. Replace, Remove,
// InsertBefore and InsertAfter edit a list by name. SetCondition does
// kubelet's condition bookkeeping for custom setters: lastHeartbeatTime on
// every pass, lastTransitionTime only when the status changes, reason and
// message always updated.
//
// One run of a list is a pass, and a pass has one time: Now(ctx) returns it
// to every setter, so a custom setter stamps its conditions with the
// injected clock's time (SetCondition(node, c, nodestatus.Now(ctx))).
// Setters.Run(ctx, node, now) runs a pass at a time the caller gives;
// Setters.SetStatus reads it from the clock of the default setters
// (Options.Clock) when the pass begins.
//
// # Default setters
//
// DefaultSetters(Options) returns kubelet's setters in kubelet's order
// (pkg/kubelet/kubelet_node_status.go, defaultNodeStatusFuncs), preceded by
// PodCIDR when Options.Runtime has UpdateRuntimeConfig (a runtime.Runtime
// does):
//
//  0. PodCIDR: passes spec.podCIDRs (joined with ",") to the runtime's
//     UpdateRuntimeConfig when they change, as kubelet does before each
//     status update; once per change, retried at the next pass after a
//     failure. It sets nothing in the status.
//  1. NodeAddress: status.addresses. InternalIP from Options.NodeIPs (one, or
//     two of different families for dual-stack), else detected (a hostname
//     that is an IP, else the host's default-route address, IPv4 preferred
//     unless NodeIPs is [::]); then Options.ExternalIPs as ExternalIP; then
//     the Hostname (Options.Hostname, else the host's, lower-cased).
//  2. MachineInfo: capacity and allocatable of cpu, memory, pods (MaxPods,
//     110; PodsPerCore), ephemeral-storage (nodefs size) and hugepages-<size>;
//     allocatable = capacity − SystemReserved − KubeReserved − hard eviction
//     thresholds (memory.available from memory, nodefs.available from
//     ephemeral-storage), and huge pages from memory, never negative.
//     nodeInfo.machineID, systemUUID, bootID (a changed boot ID records a
//     Rebooted event) and swap capacity. A resource whose host fact is
//     missing is removed, so Ready reports it missing.
//  3. VersionInfo: nodeInfo.kernelVersion, osImage, containerRuntimeVersion
//     ("<runtime name>://<version>", the version read as kubelet reads it:
//     semantic, else generic, so "v1.7.24" is 1.7.24 and "1.6.20~ds1" is
//     1.6.20; "<name>://Unknown" when the runtime does not answer), kubeletVersion (Options.KubeletVersion, default
//     DefaultKubeletVersion "v1.37.2+nodekit"); kubeProxyVersion, deprecated,
//     is cleared.
//  4. DaemonEndpoints: daemonEndpoints.kubeletEndpoint.port (10250).
//  5. Images: status.images, at most MaxImages (50; -1 all), largest first
//     (equal sizes by image ID, descending), each with at most
//     MaxNamesPerImage (5) names, digests before tags. A failed listing
//     keeps the list last reported, as kubelet (which reports its cache of
//     the last good listing) does, and the setter returns the error.
//  6. GoRuntime: nodeInfo.operatingSystem and architecture (GOOS, GOARCH).
//  7. RuntimeHandlers: status.runtimeHandlers from the runtime's status,
//     sorted by name, while the runtime is ready.
//  8. NodeFeatures: status.features (supplementalGroupsPolicy) while the
//     runtime is ready and reports features; otherwise left alone.
//  9. MemoryPressure, 10. DiskPressure, 11. PIDPressure: one parameterised
//     setter, three times. True (KubeletHasInsufficientMemory,
//     KubeletHasDiskPressure, KubeletHasInsufficientPID) while a hard
//     eviction threshold of its signals is met (memory.available;
//     nodefs.available, nodefs.inodesFree, imagefs.available,
//     imagefs.inodesFree; pid.available), and until none has been met for
//     PressureTransitionPeriod (5m); False (KubeletHasSufficientMemory,
//     KubeletHasNoDiskPressure, KubeletHasSufficientPID) otherwise, with
//     kubelet's messages. Defaults: kubelet's Linux hard thresholds,
//     memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
//     imagefs.available<15%, imagefs.inodesFree<5%.
//  12. Ready: True, KubeletReady, "kubelet is posting ready status"; or
//     False, KubeletNotReady, with kubelet's message: the runtime's trouble
//     ("container runtime status check may not have completed yet" before
//     the first good status check, "container runtime is down" when no
//     check has been good for Options.RuntimeDownAfter (30s), "<check> is not
//     healthy: ...",
//     "container runtime not ready: RuntimeReady=false reason:... message:..."),
//     the network's ("container runtime network not ready: ..."), and
//     "missing node capacity for resources: ..." when cpu, memory, pods or
//     ephemeral-storage is missing, aggregated as kubelet aggregates them
//     ("[a, b]" when several). A good check is one that answers with
//     RuntimeReady true; a check that fails keeps what the last answer said
//     (as kubelet's runtime state does) and the setter returns its error. The
//     last condition setter, as kubelet's.
//  13. VolumesInUse: status.volumesInUse from Options.VolumesInUse; left
//     alone when that is nil.
//
// With Options.Recorder set, condition changes record kubelet's events
// (NodeReady, NodeNotReady, NodeHasSufficientMemory, ...).
//
// # Host facts and the runtime
//
// Host facts come from a Host. NewLinuxHost reads the machine: memory and
// CPUs through github.com/prometheus/procfs (already in the module graph
// through the Prometheus client, pure Go, reads /proc directly without cgo
// or commands), file systems and the kernel release through statfs(2) and
// uname(2) from golang.org/x/sys/unix, and pid_max, boot_id, machine-id,
// os-release, the DMI product UUID and huge pages from their files. nodefs
// is the file system of /var/lib/kubelet (/ while that does not exist),
// imagefs that of /var/lib/containerd (nodefs while that does not exist).
// Facts that cannot be read are listed in HostFacts.Missing, each a
// FactError naming the fact; setters that need one return that error and
// carry on with the rest. Nothing panics on a missing fact.
// nodestatustest.Host serves a fixed set of facts for tests and simulated
// nodes, and nodestatustest.Facts(name) makes a plausible one per node.
//
// The runtime is a RuntimeInfo: Version, Status and ListImages with the
// signatures of runtime.Runtime, so any runtime.Runtime will do;
// nodestatustest.Runtime is a small settable fake.
//
// Options.RuntimeStatus replaces the status check with a
// RuntimeStatusSource: the runtime's status as another component last
// observed it (podsync's CRI syncer asks on every relist, once a second), so
// an agent that runs pods does not poll the runtime twice. Ready,
// RuntimeHandlers and NodeFeatures then read the source and never call
// Runtime.Status; a good answer is dated by its observation, so a source
// that stops observing makes the node NotReady ("container runtime is
// down") Options.RuntimeDownAfter after its last good observation. Without it each
// pass asks Runtime.Status, as before.
//
// Within one Setters.SetStatus call the host and each runtime method are
// asked at most once, shared by all setters; nothing is cached from one call
// to the next, so a pass never sees a stale answer.
//
// # Custom setters
//
// DiskUsage is a custom setter to copy: it reports how full the file system
// holding a path is as a condition of its own type ("DiskUsageHigh", True at
// or above a threshold percentage, Unknown when unreadable) and, optionally,
// the file system's size as an extended resource. Add it before Ready:
//
//	setters, _ := nodestatus.DefaultSetters(opts)
//	du, _ := nodestatus.DiskUsage(nodestatus.DiskUsageOptions{Path: "/data", ThresholdPercent: 85})
//	setters, _ = setters.InsertBefore(nodestatus.SetterReady, nodestatus.Named{Name: "DiskUsage", StatusSetter: du})
//
// # Timing
//
// The setters do not run loops of their own; a heartbeat calls SetStatus on
// a copy of the node every update period (kubelet: 10s). Times come from
// the pass (Now), which comes from Options.Clock. The pressure conditions'
// transition period and the runtime's 30s are measured on that clock
// between passes.
//
// # Differences from kubelet
//
//   - No cloud provider: addresses come from Options or the host. The node
//     IPs are not checked against the host's interfaces, so simulated nodes
//     may use any; detection does not look the node name up in DNS.
//   - memory.available is MemAvailable of /proc/meminfo, not capacity less
//     the root cgroup's working set; pid.available is the lower of pid_max
//     and threads-max less the tasks in /proc/loadavg, as kubelet.
//   - MachineInfo computes allocatable only for the resources it owns;
//     kubelet mirrors every capacity entry (device plugins) into allocatable.
//   - The runtime's status is asked each pass rather than every 5s in the
//     background, so "container runtime is down" appears at the first pass
//     at least 30s after the last good check.
//
// # Figures
//
// A pass of the defaults for a simulated node costs a few microseconds of CPU
// over the caller's copy of the node; BENCHMARKS.md has the figures.
package nodestatus
