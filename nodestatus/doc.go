// Package nodestatus computes a Node's status from the host and the container
// runtime, the way kubelet does, as an ordered list of named setters that a
// user can edit. nodekit.NewNodeHalf runs the defaults and
// NodeHalfOptions.CustomSetters.
//
// # Usage
//
//	setters, _ := nodestatus.DefaultSetters(nodestatus.Options{Runtime: rt, MaxPods: 110})
//	du, _ := nodestatus.DiskUsage(nodestatus.DiskUsageOptions{Path: "/data", ThresholdPercent: 85})
//	// Before Ready, so that Ready stays the last condition, as kubelet keeps it.
//	setters, _ = setters.InsertBefore(nodestatus.SetterReady, nodestatus.Named{Name: "DiskUsage", StatusSetter: du})
//	err := setters.SetStatus(ctx, node) // on a copy; a heartbeat does this
//
// A StatusSetter sets its part of a *corev1.Node's status in place and
// never touches fields or condition types it does not own, so conditions
// written by other agents (node-problem-detector) survive. Setters is an
// ordered list of Named setters and itself a StatusSetter: it runs every
// setter, even after one fails, and returns the failures joined, each a
// *SetterError naming its setter. Replace, Remove, InsertBefore and
// InsertAfter edit it by name; StatusSetterFunc adapts a function.
// SetCondition does kubelet's condition bookkeeping (lastHeartbeatTime every
// pass, lastTransitionTime only on a change), stamped with Now(ctx), the
// pass's time.
//
// DefaultSetters returns kubelet's setters in kubelet's order
// (defaultNodeStatusFuncs), preceded by PodCIDR, which passes spec.podCIDRs
// to the runtime's UpdateRuntimeConfig: NodeAddress, MachineInfo
// (capacity, and allocatable less reservations and hard eviction
// thresholds), VersionInfo, DaemonEndpoints, Images (at most 50, largest
// first), GoRuntime, RuntimeHandlers, NodeFeatures, MemoryPressure,
// DiskPressure, PIDPressure, Ready (kubelet's reasons and messages) and
// VolumesInUse. The Setter* constants name them. With Options.Recorder,
// condition changes record kubelet's events.
//
// Host facts come from a Host: NewLinuxHost reads /proc, statfs(2),
// uname(2) and a few files, without cgo or commands; facts it cannot read
// are listed in HostFacts.Missing and the setters that need one report it,
// never panic. nodestatustest has a fixed Host and a settable runtime. The
// runtime is a RuntimeInfo (Version, Status, ListImages: any
// runtime.Runtime). Options.RuntimeStatus replaces the status call with a
// RuntimeStatusSource, the runtime's status as the pod half last observed
// it (nodekit.PodHalf.RuntimeStatus), so the runtime is not polled twice.
//
// # Timing
//
// The setters run no loop of their own; a heartbeat calls SetStatus every
// update period (kubelet: 10s). Within one pass the host and each runtime
// method are asked at most once; nothing is cached from one pass to the
// next. The pressure conditions' transition period (5m) and
// Options.RuntimeDownAfter (30s, "container runtime is down") are measured
// on Options.Clock between passes. A pass costs a few microseconds for a
// simulated node; BENCHMARKS.md has the figures.
//
// # Limits
//
// A failed image listing keeps the list last reported, and the setter
// returns the error. A resource whose host fact is missing is removed from
// capacity, so Ready reports it missing.
//
// # Differences from the kubelet
//
//   - No cloud provider: addresses come from Options or the host. Node IPs
//     are not checked against the host's interfaces, so simulated nodes may
//     use any; detection does not look the node name up in DNS.
//   - memory.available is MemAvailable of /proc/meminfo, not capacity less
//     the root cgroup's working set.
//   - MachineInfo computes allocatable only for the resources it owns; the
//     kubelet mirrors every capacity entry (device plugins) into it.
//   - Without Options.RuntimeStatus the runtime's status is asked each pass
//     rather than every 5s in the background, so "container runtime is
//     down" appears at the first pass at least 30s after the last good
//     check.
package nodestatus
