// Package usage measures what the node and its pods use — CPU, memory, file
// systems, network, processes — and publishes each sample in the form of
// kubelet's /stats/summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1). It is
// the data half of the node API: podsync/nodeapi serves its samples as
// /stats/summary and /metrics/resource, which metrics-server reads.
//
// # Usage
//
//	c, err := usage.New(usage.Options{NodeName: "node-1", Runtime: rt,
//		PodCgroupDirs: cri.PodCgroupDirs})
//	go c.Run(ctx)           // a sample at once, then every 10s
//	snap := c.Latest()      // the last sample, never waits
//
// SyncOnce takes one sample, so a test (or a simulator) drives exactly the
// code Run drives, on a fake clock.
//
// # What a sample holds
//
// The node: cumulative CPU time from the root cgroup (cpuacct.usage on
// cgroup v1, cpu.stat's usage_usec on v2) or else /proc/stat's busy time;
// memory as kubelet computes it, working set = usage − inactive file pages,
// available = MemTotal − working set, with RSS and page faults (the root
// memory cgroup on v1; /proc/meminfo and /proc/vmstat on v2, whose root
// cgroup has no memory.current); the file system of Options.RootDir (statfs);
// the runtime's image file system (ImageFsInfo, statfs of its mount point);
// per-interface network counters from /proc/net/dev without lo, the default
// route's interface first; kubelet's rlimit (min of kernel.pid_max and
// kernel.threads-max; the task count from /proc/loadavg); boot time as the
// start time.
//
// The pods: one per pod UID with a ready sandbox (the newest), with its
// running containers (the newest per name). A container's CPU and memory
// come from its cgroup, the directory named by its ID below its pod's
// (where containerd puts it with the cgroupfs driver), as cAdvisor reads
// them; its writable layer from CRI ListContainerStats, asked every
// VolumeInterval (and the figures reported with their time in between);
// a container without such a cgroup (its pod has none, or another
// runtime's layout) takes all three from ListContainerStats, then asked
// at every sample. containerd answers ListContainerStats by asking every
// container's shim: with 110 containers, a call every 10 s added about
// 40 ms to the p99 start of the next pod (BENCHMARKS.md). Their log usage is the
// size of <PodLogRoot>/<namespace>_<name>_<uid>/<container>/, rotated files
// included. A pod's CPU, memory and process count come from its cgroup
// (Options.PodCgroupDirs, cgroup v1 or v2 files) and its network counters
// from /proc/<pid>/net/dev of a process in that cgroup, unless the process
// is in the host's network namespace (a host-network pod has none), as the
// kubelet's cAdvisor reads them. A pod without cgroup directories takes
// them from CRI ListPodSandboxStats (called only when there is such a pod;
// a runtime that answers Unimplemented is not asked again), or else sums
// its containers'. The cgroup comes first because containerd 1.6 answers
// ListPodSandboxStats with a `runc ps` per pod: with 110 pods on two cores,
// that cost the runtime more CPU than anything else but the exec probes,
// and slowed every container start (BENCHMARKS.md). A cgroup's files are
// read, after its first sample, only in the directories its figures were
// found in (on cgroup v1, where a cgroup has a directory in every mounted
// hierarchy: one each for CPU, memory and processes), each with an open,
// its reads and a close: on this machine's ten cgroup v1 mounts, 17 µs a
// read where looking through every directory took 75 µs (BENCHMARKS.md).
// A figure found in none of them (no pids hierarchy) is not looked for
// again while the cgroup is kept.
// A pod's volumes on disk (Options.PodVolumeDirs) are its VolumeStats, each
// the size of its directory, measured every VolumeInterval (1m, the
// kubelet's volumeStatsAggPeriod) and reported with the time it was taken
// in between; its ephemeral storage is its containers' writable layers and
// logs and those volumes.
//
// Rates (usageNanoCores) are computed between two samples of the same
// cumulative counter on the times the counter was read (a runtime's own
// rate, when it reports one, is taken as is); the first sample, and one
// after a counter went back, has none.
//
// # Timing
//
// Options.Interval (default 10s, cAdvisor's housekeeping interval). A sample
// costs a handful of file reads for the node and each pod, four or five CRI
// calls, and a directory walk per container's logs and per volume on disk;
// Latest is an atomic load.
//
// # Why files and not cAdvisor or containerd's cgroups package
//
// cAdvisor would add a second, always-running collector with its own
// housekeeping goroutines per container, caches and a large dependency tree
// (tens of MiB of RSS, against the agent's 30 MiB idle goal), to produce
// figures the runtime already reports over CRI; containerd's cgroups package
// is lighter but brings protobuf stats types and systemd/dbus code for the
// handful of files read here. Reading the dozen files by hand keeps the
// footprint to what a sample allocates, and the root directory option makes
// every reader testable on a fake /proc and /sys.
//
// # Limits
//
// No system containers (kubelet, runtime, pods, misc), no accelerators, no
// volume stats, no PSI, no swap; a pod's network is known only from a
// runtime with sandbox stats. Figures are read from the host's network
// namespace, so the agent must run in it. Linux only.
package usage
