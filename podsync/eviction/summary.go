package eviction

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// FromSummary makes the Snapshot the manager observes from kubelet's stats
// Summary (what /stats/summary serves, and what nodekit's usage collector
// publishes), taken at t, as kubelet's eviction manager reads its summary
// provider. A part of the Summary that is missing leaves the signals that
// need it unobserved; a nil Summary gives a Snapshot with only Time.
//
//   - Memory: Node.Memory's AvailableBytes and WorkingSetBytes (both set).
//   - AllocatableMemory: the same of the "pods" system container, if the
//     Summary has it.
//   - NodeFS: Node.Fs; ImageFS: Node.Runtime.ImageFs (kubelet reports the
//     node's file system there when images live on it). Each needs
//     AvailableBytes and CapacityBytes; inodes are taken when InodesFree
//     and Inodes are both set.
//   - DedicatedImageFS: kubelet compares the devices of the two file
//     systems, which a Summary does not carry; FromSummary takes the image
//     file system as dedicated when the capacities (bytes, or inodes when
//     both report them) of the two differ, and as the node's when they are
//     equal or either is unknown. Two distinct file systems of exactly the
//     same size read as one: set DedicatedImageFS on the result when the
//     node is known to differ.
//   - PIDs: Node.Rlimit's MaxPID and NumOfRunningProcesses (both set,
//     MaxPID positive).
//   - Pods, by PodRef.UID (pods without one are left out): the memory
//     working set of the pod (the sum of its containers' when the pod's is
//     missing); rootfs and logs summed over its containers (UsedBytes,
//     InodesUsed); local volumes as EphemeralStorage less the containers'
//     rootfs and logs (kubelet's ephemeral storage counts only the pod's
//     local ephemeral volumes), or, without EphemeralStorage, the
//     VolumeStats that are not persistent volume claims; processes from
//     ProcessStats; each container's working set, rootfs and logs.
//
// The Snapshot shares nothing with s.
func FromSummary(t time.Time, s *statsapi.Summary) *Snapshot {
	snap := &Snapshot{Time: t}
	if s == nil {
		return snap
	}
	n := &s.Node
	snap.Memory = memoryStats(n.Memory)
	for i := range n.SystemContainers {
		if c := &n.SystemContainers[i]; c.Name == statsapi.SystemContainerPods {
			snap.AllocatableMemory = memoryStats(c.Memory)
			break
		}
	}
	snap.NodeFS = fsStats(n.Fs)
	if n.Runtime != nil {
		snap.ImageFS = fsStats(n.Runtime.ImageFs)
		snap.DedicatedImageFS = dedicated(n.Fs, n.Runtime.ImageFs)
	}
	if r := n.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil && *r.MaxPID > 0 {
		snap.PIDs = &PIDStats{MaxPID: uint64(*r.MaxPID), Running: uint64(max(*r.NumOfRunningProcesses, 0))}
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.PodRef.UID == "" {
			continue
		}
		snap.Pods = append(snap.Pods, podUsage(p))
	}
	return snap
}

func memoryStats(m *statsapi.MemoryStats) *MemoryStats {
	if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil {
		return nil
	}
	return &MemoryStats{AvailableBytes: *m.AvailableBytes, WorkingSetBytes: *m.WorkingSetBytes}
}

func fsStats(f *statsapi.FsStats) *FsStats {
	if f == nil || f.AvailableBytes == nil || f.CapacityBytes == nil {
		return nil
	}
	out := &FsStats{AvailableBytes: *f.AvailableBytes, CapacityBytes: *f.CapacityBytes}
	if f.InodesFree != nil && f.Inodes != nil {
		out.InodesFree, out.Inodes = *f.InodesFree, *f.Inodes
	}
	return out
}

// dedicated reports whether the image file system is not the node's: both
// capacities are known and differ (bytes, or inodes when both have them).
func dedicated(node, image *statsapi.FsStats) bool {
	if node == nil || image == nil || node.CapacityBytes == nil || image.CapacityBytes == nil {
		return false
	}
	if *node.CapacityBytes != *image.CapacityBytes {
		return true
	}
	return node.Inodes != nil && image.Inodes != nil && *node.Inodes != *image.Inodes
}

func podUsage(p *statsapi.PodStats) PodUsage {
	u := PodUsage{UID: types.UID(p.PodRef.UID)}
	var containersWS uint64
	for i := range p.Containers {
		c := &p.Containers[i]
		cu := ContainerUsage{Name: c.Name}
		if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
			cu.MemoryWorkingSetBytes = *c.Memory.WorkingSetBytes
		}
		var rootInodes, logInodes uint64
		cu.RootfsBytes, rootInodes = used(c.Rootfs)
		cu.LogsBytes, logInodes = used(c.Logs)
		u.RootfsBytes += cu.RootfsBytes
		u.LogsBytes += cu.LogsBytes
		u.RootfsInodes += rootInodes
		u.LogsInodes += logInodes
		containersWS += cu.MemoryWorkingSetBytes
		u.Containers = append(u.Containers, cu)
	}
	if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
		u.MemoryWorkingSetBytes = *p.Memory.WorkingSetBytes
	} else {
		u.MemoryWorkingSetBytes = containersWS
	}
	for i := range p.VolumeStats {
		if v := &p.VolumeStats[i]; v.PVCRef == nil && v.UsedBytes != nil {
			if u.Volumes == nil {
				u.Volumes = map[string]uint64{}
			}
			u.Volumes[v.Name] = *v.UsedBytes
		}
	}
	if e := p.EphemeralStorage; e != nil && (e.UsedBytes != nil || e.InodesUsed != nil) {
		if e.UsedBytes != nil {
			u.VolumeBytes = sub(*e.UsedBytes, u.RootfsBytes+u.LogsBytes)
		}
		if e.InodesUsed != nil {
			u.VolumeInodes = sub(*e.InodesUsed, u.RootfsInodes+u.LogsInodes)
		}
	} else {
		for i := range p.VolumeStats {
			if v := &p.VolumeStats[i]; v.PVCRef == nil {
				b, inodes := used(&v.FsStats)
				u.VolumeBytes += b
				u.VolumeInodes += inodes
			}
		}
	}
	if p.ProcessStats != nil && p.ProcessStats.ProcessCount != nil {
		u.Processes = *p.ProcessStats.ProcessCount
	}
	return u
}

// used returns the bytes and inodes f uses, 0 for what it does not report.
func used(f *statsapi.FsStats) (bytes, inodes uint64) {
	if f == nil {
		return 0, 0
	}
	if f.UsedBytes != nil {
		bytes = *f.UsedBytes
	}
	if f.InodesUsed != nil {
		inodes = *f.InodesUsed
	}
	return bytes, inodes
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
