package eviction

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Observer reports the node's resource usage, as kubelet's summary
// provider does for its eviction manager.
type Observer interface {
	// Observe returns what the node and its pods use now. The manager
	// neither keeps nor changes the snapshot after the call returns.
	Observe(ctx context.Context) (*Snapshot, error)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context) (*Snapshot, error)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context) (*Snapshot, error) { return f(ctx) }

// Snapshot is one observation of the node. A nil part means it is not
// known: the signals that need it are not observed, and their thresholds
// are not met.
type Snapshot struct {
	// Time is when the stats were collected. When set and equal to the
	// previous snapshot's, the stats are stale: conditions are computed but
	// nothing is reclaimed or evicted, as kubelet acts only on updated
	// stats.
	Time time.Time
	// Memory is the node's memory: memory.available.
	Memory *MemoryStats
	// AllocatableMemory is the pods' cgroup memory against its limit
	// (node allocatable): allocatableMemory.available.
	AllocatableMemory *MemoryStats
	// NodeFS is the root file system: nodefs.available, nodefs.inodesFree.
	NodeFS *FsStats
	// ImageFS is the file system of the runtime's images:
	// imagefs.available, imagefs.inodesFree. Kubelet reports the nodefs
	// here too when images live on it.
	ImageFS *FsStats
	// DedicatedImageFS is true when ImageFS is a file system of its own,
	// not the nodefs. It decides which pod usage counts against nodefs and
	// imagefs signals, and which signals reclaimers run for.
	DedicatedImageFS bool
	// PIDs is the node's process IDs: pid.available.
	PIDs *PIDStats
	// Pods is the usage of the pods, matched to the active pods by UID.
	// An active pod without usage is ranked first for eviction, as kubelet
	// ranks a pod it has no stats for.
	Pods []PodUsage
}

// MemoryStats is memory in bytes. The capacity of a memory signal is
// AvailableBytes+WorkingSetBytes, as kubelet computes it.
type MemoryStats struct {
	AvailableBytes  uint64
	WorkingSetBytes uint64
}

// FsStats is a file system's space and inodes.
type FsStats struct {
	AvailableBytes uint64
	CapacityBytes  uint64
	InodesFree     uint64
	Inodes         uint64
}

// PIDStats is the node's process IDs: pid.available is MaxPID less
// Running, of MaxPID.
type PIDStats struct {
	MaxPID  uint64
	Running uint64
}

// PodUsage is what one pod uses.
type PodUsage struct {
	UID types.UID
	// MemoryWorkingSetBytes is the pod's memory working set (its cgroup's).
	MemoryWorkingSetBytes uint64
	// RootfsBytes, LogsBytes and VolumeBytes are the pod's disk usage: its
	// containers' writable layers, their logs, and its local volumes
	// (emptyDir on disk, configMap, secret, downward API, projected
	// volumes kept on the node). RootfsBytes counts against imagefs when
	// the image file system is dedicated, against nodefs otherwise; logs
	// and volumes against nodefs. Their sum is the pod's ephemeral-storage
	// use.
	RootfsBytes, LogsBytes, VolumeBytes uint64
	// RootfsInodes, LogsInodes and VolumeInodes are the inodes they use,
	// for the inodesFree signals.
	RootfsInodes, LogsInodes, VolumeInodes uint64
	// Volumes is the bytes each local volume (not a persistent volume
	// claim) uses, by volume name, for emptyDir sizeLimits.
	Volumes map[string]uint64
	// Processes is the number of processes in the pod, for pid.available.
	Processes uint64
	// Containers is the usage of the pod's regular containers, for the
	// eviction message (which names those over their request).
	Containers []ContainerUsage
}

// ContainerUsage is what one container uses.
type ContainerUsage struct {
	Name                  string
	MemoryWorkingSetBytes uint64
	// RootfsBytes and LogsBytes are its writable layer and its logs.
	RootfsBytes, LogsBytes uint64
}

// Killer stops an evicted pod. It is kubelet's pod-kill path: the agent's
// pod workers.
type Killer interface {
	// Evict stops pod within gracePeriod seconds and sets its status to
	// status (phase Failed, reason Evicted, the message and the
	// DisruptionTarget condition) over what the pod's status holds. It may
	// return before the pod's containers are gone; the manager does not
	// wait (see Options.PodCleanedUp).
	Evict(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus, gracePeriod int64) error
}

// KillerFunc adapts a function to Killer.
type KillerFunc func(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus, gracePeriod int64) error

// Evict calls f.
func (f KillerFunc) Evict(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus, gracePeriod int64) error {
	return f(ctx, pod, status, gracePeriod)
}

// Reclaimer frees node-level resources before pods are evicted: kubelet's
// image garbage collection and dead-container collection.
type Reclaimer interface {
	// Reclaim frees what it can for signal (a disk signal) and returns
	// the bytes it freed.
	Reclaim(ctx context.Context, signal Signal) (freedBytes uint64, err error)
}

// ReclaimerFunc adapts a function to Reclaimer.
type ReclaimerFunc func(ctx context.Context, signal Signal) (uint64, error)

// Reclaim calls f.
func (f ReclaimerFunc) Reclaim(ctx context.Context, signal Signal) (uint64, error) {
	return f(ctx, signal)
}

var (
	_ Observer  = ObserverFunc(nil)
	_ Killer    = KillerFunc(nil)
	_ Reclaimer = ReclaimerFunc(nil)
)
