package pressure

import corev1 "k8s.io/api/core/v1"

// Kubelet's eviction signals.
const (
	MemoryAvailable            = "memory.available"
	AllocatableMemoryAvailable = "allocatableMemory.available"
	NodeFsAvailable            = "nodefs.available"
	NodeFsInodesFree           = "nodefs.inodesFree"
	ImageFsAvailable           = "imagefs.available"
	ImageFsInodesFree          = "imagefs.inodesFree"
	PIDAvailable               = "pid.available"
)

// Kubelet's names for the resources that are not API resource names.
const (
	ResourceInodes corev1.ResourceName = "inodes"
	ResourcePIDs   corev1.ResourceName = "pids"
)

// Source is what a signal is observed on.
type Source int

// The sources of the signals.
const (
	// SourceMemory is the node's memory.
	SourceMemory Source = iota
	// SourceAllocatableMemory is the memory under the node's allocatable
	// (the pods' cgroup).
	SourceAllocatableMemory
	// SourceNodeFS is the node's root file system.
	SourceNodeFS
	// SourceImageFS is the runtime's image file system.
	SourceImageFS
	// SourcePIDs is the node's process IDs.
	SourcePIDs
)

// Signal is one eviction signal: what is available of Resource on Source,
// whose thresholds drive Condition.
type Signal struct {
	Name      string
	Condition corev1.NodeConditionType
	// Resource is what is counted (bytes of memory or ephemeral-storage,
	// inodes, pids) and what an eviction for the signal reclaims, as
	// kubelet names it in its eviction messages.
	Resource corev1.ResourceName
	Source   Source
}

// Memory reports whether s is a memory signal.
func (s Signal) Memory() bool { return s.Resource == corev1.ResourceMemory }

// Disk reports whether s is a file-system signal (bytes or inodes).
func (s Signal) Disk() bool { return s.Source == SourceNodeFS || s.Source == SourceImageFS }

// Inodes reports whether s counts inodes.
func (s Signal) Inodes() bool { return s.Resource == ResourceInodes }

// signals is the one table of the eviction signals, sorted by name.
var signals = [...]Signal{
	{AllocatableMemoryAvailable, corev1.NodeMemoryPressure, corev1.ResourceMemory, SourceAllocatableMemory},
	{ImageFsAvailable, corev1.NodeDiskPressure, corev1.ResourceEphemeralStorage, SourceImageFS},
	{ImageFsInodesFree, corev1.NodeDiskPressure, ResourceInodes, SourceImageFS},
	{MemoryAvailable, corev1.NodeMemoryPressure, corev1.ResourceMemory, SourceMemory},
	{NodeFsAvailable, corev1.NodeDiskPressure, corev1.ResourceEphemeralStorage, SourceNodeFS},
	{NodeFsInodesFree, corev1.NodeDiskPressure, ResourceInodes, SourceNodeFS},
	{PIDAvailable, corev1.NodePIDPressure, ResourcePIDs, SourcePIDs},
}

// NumSignals is the number of signals.
const NumSignals = len(signals)

// Signals returns the signals, sorted by name.
func Signals() [NumSignals]Signal { return signals }

// Lookup returns the signal named name.
func Lookup(name string) (Signal, bool) {
	for i := range signals {
		if signals[i].Name == name {
			return signals[i], true
		}
	}
	return Signal{}, false
}

// Condition is kubelet's wording of one pressure condition: the reason
// and message of the condition when True and when False, and the reason
// of the node event a change to each records.
type Condition struct {
	Type                                  corev1.NodeConditionType
	TrueReason, TrueMessage, TrueEvent    string
	FalseReason, FalseMessage, FalseEvent string
}

// conditions are the pressure conditions, in the order kubelet reports
// them.
var conditions = [...]Condition{
	{corev1.NodeMemoryPressure,
		"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "NodeHasInsufficientMemory",
		"KubeletHasSufficientMemory", "kubelet has sufficient memory available", "NodeHasSufficientMemory"},
	{corev1.NodeDiskPressure,
		"KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure",
		"KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure"},
	{corev1.NodePIDPressure,
		"KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasInsufficientPID",
		"KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID"},
}

// NumConditions is the number of pressure conditions.
const NumConditions = len(conditions)

// Conditions returns the pressure conditions: MemoryPressure,
// DiskPressure, PIDPressure.
func Conditions() [NumConditions]Condition { return conditions }

// ConditionIndex returns the index of condition type t in Conditions, or
// -1 when t is not a pressure condition.
func ConditionIndex(t corev1.NodeConditionType) int {
	for i := range conditions {
		if conditions[i].Type == t {
			return i
		}
	}
	return -1
}

// LookupCondition returns the wording of pressure condition t.
func LookupCondition(t corev1.NodeConditionType) (Condition, bool) {
	if i := ConditionIndex(t); i >= 0 {
		return conditions[i], true
	}
	return Condition{}, false
}
