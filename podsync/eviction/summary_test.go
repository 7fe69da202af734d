package eviction_test

import (
	"reflect"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/podsync/eviction"
)

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func fs(avail, capacity, inodesFree, inodes uint64) *statsapi.FsStats {
	return &statsapi.FsStats{AvailableBytes: u64(avail), CapacityBytes: u64(capacity), InodesFree: u64(inodesFree), Inodes: u64(inodes)}
}

func usedFs(bytes, inodes uint64) *statsapi.FsStats {
	return &statsapi.FsStats{UsedBytes: u64(bytes), InodesUsed: u64(inodes)}
}

func mem(avail, ws uint64) *statsapi.MemoryStats {
	return &statsapi.MemoryStats{AvailableBytes: u64(avail), WorkingSetBytes: u64(ws)}
}

func TestFromSummary(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	full := &statsapi.Summary{
		Node: statsapi.NodeStats{
			Memory: mem(1*Gi, 3*Gi),
			SystemContainers: []statsapi.ContainerStats{
				{Name: statsapi.SystemContainerKubelet, Memory: mem(9, 9)},
				{Name: statsapi.SystemContainerPods, Memory: mem(512*Mi, 2*Gi)},
			},
			Fs:      fs(10*Gi, 100*Gi, 1000, 5000),
			Runtime: &statsapi.RuntimeStats{ImageFs: fs(20*Gi, 200*Gi, 2000, 6000)},
			Rlimit:  &statsapi.RlimitStats{MaxPID: i64(4194304), NumOfRunningProcesses: i64(300)},
		},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "default", UID: "uid-web"},
			Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(300 * Mi)},
			Containers: []statsapi.ContainerStats{
				{Name: "app", Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(200 * Mi)}, Rootfs: usedFs(10*Mi, 10), Logs: usedFs(1*Mi, 2)},
				{Name: "sidecar", Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(90 * Mi)}, Rootfs: usedFs(5*Mi, 5), Logs: usedFs(2*Mi, 1)},
			},
			// Local volumes: 100Mi and 30 inodes.
			EphemeralStorage: usedFs(118*Mi, 48),
			VolumeStats: []statsapi.VolumeStats{
				{Name: "cache", FsStats: *usedFs(100*Mi, 30)},
				{Name: "data", FsStats: *usedFs(5*Gi, 100), PVCRef: &statsapi.PVCReference{Name: "data", Namespace: "default"}},
			},
			ProcessStats: &statsapi.ProcessStats{ProcessCount: u64(12)},
		}},
	}
	web := eviction.PodUsage{
		UID: "uid-web", MemoryWorkingSetBytes: 300 * Mi,
		RootfsBytes: 15 * Mi, LogsBytes: 3 * Mi, VolumeBytes: 100 * Mi,
		RootfsInodes: 15, LogsInodes: 3, VolumeInodes: 30,
		Volumes:   map[string]uint64{"cache": 100 * Mi}, // not the claim's
		Processes: 12,
		Containers: []eviction.ContainerUsage{
			{Name: "app", MemoryWorkingSetBytes: 200 * Mi, RootfsBytes: 10 * Mi, LogsBytes: 1 * Mi},
			{Name: "sidecar", MemoryWorkingSetBytes: 90 * Mi, RootfsBytes: 5 * Mi, LogsBytes: 2 * Mi},
		},
	}

	for _, tc := range []struct {
		name string
		in   *statsapi.Summary
		want *eviction.Snapshot
	}{
		{"nil", nil, &eviction.Snapshot{Time: at}},
		{"empty", &statsapi.Summary{}, &eviction.Snapshot{Time: at}},
		{"full", full, &eviction.Snapshot{
			Time:              at,
			Memory:            &eviction.MemoryStats{AvailableBytes: 1 * Gi, WorkingSetBytes: 3 * Gi},
			AllocatableMemory: &eviction.MemoryStats{AvailableBytes: 512 * Mi, WorkingSetBytes: 2 * Gi},
			NodeFS:            &eviction.FsStats{AvailableBytes: 10 * Gi, CapacityBytes: 100 * Gi, InodesFree: 1000, Inodes: 5000},
			ImageFS:           &eviction.FsStats{AvailableBytes: 20 * Gi, CapacityBytes: 200 * Gi, InodesFree: 2000, Inodes: 6000},
			DedicatedImageFS:  true,
			PIDs:              &eviction.PIDStats{MaxPID: 4194304, Running: 300},
			Pods:              []eviction.PodUsage{web},
		}},
		{"images on the node's file system", &statsapi.Summary{Node: statsapi.NodeStats{
			Fs:      fs(10*Gi, 100*Gi, 1000, 5000),
			Runtime: &statsapi.RuntimeStats{ImageFs: fs(9*Gi, 100*Gi, 999, 5000)},
		}}, &eviction.Snapshot{
			Time:    at,
			NodeFS:  &eviction.FsStats{AvailableBytes: 10 * Gi, CapacityBytes: 100 * Gi, InodesFree: 1000, Inodes: 5000},
			ImageFS: &eviction.FsStats{AvailableBytes: 9 * Gi, CapacityBytes: 100 * Gi, InodesFree: 999, Inodes: 5000},
		}},
		{"same size, other inodes: dedicated", &statsapi.Summary{Node: statsapi.NodeStats{
			Fs:      fs(10*Gi, 100*Gi, 1000, 5000),
			Runtime: &statsapi.RuntimeStats{ImageFs: fs(9*Gi, 100*Gi, 999, 7000)},
		}}, &eviction.Snapshot{
			Time:             at,
			NodeFS:           &eviction.FsStats{AvailableBytes: 10 * Gi, CapacityBytes: 100 * Gi, InodesFree: 1000, Inodes: 5000},
			ImageFS:          &eviction.FsStats{AvailableBytes: 9 * Gi, CapacityBytes: 100 * Gi, InodesFree: 999, Inodes: 7000},
			DedicatedImageFS: true,
		}},
		{"parts missing", &statsapi.Summary{Node: statsapi.NodeStats{
			Memory:           &statsapi.MemoryStats{AvailableBytes: u64(1)},                                 // no working set
			SystemContainers: []statsapi.ContainerStats{{Name: statsapi.SystemContainerPods}},               // no memory
			Fs:               &statsapi.FsStats{AvailableBytes: u64(10 * Gi), CapacityBytes: u64(100 * Gi)}, // no inodes
			Runtime:          &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{UsedBytes: u64(3 * Gi)}},    // no capacity
			Rlimit:           &statsapi.RlimitStats{NumOfRunningProcesses: i64(300)},                        // no pid_max
		}, Pods: []statsapi.PodStats{
			{PodRef: statsapi.PodReference{Name: "no-uid"}},
			{PodRef: statsapi.PodReference{UID: "bare"}},
			{PodRef: statsapi.PodReference{UID: "containers-only"}, Containers: []statsapi.ContainerStats{
				{Name: "a", Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(7)}, Rootfs: &statsapi.FsStats{}},
				{Name: "b", Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(3)}, Logs: usedFs(4, 1)},
			}, VolumeStats: []statsapi.VolumeStats{{Name: "v", FsStats: *usedFs(20, 2)}}},
		}}, &eviction.Snapshot{
			Time:   at,
			NodeFS: &eviction.FsStats{AvailableBytes: 10 * Gi, CapacityBytes: 100 * Gi},
			Pods: []eviction.PodUsage{
				{UID: "bare"},
				// The pod's working set is its containers'; volumes
				// without EphemeralStorage are the VolumeStats.
				{UID: "containers-only", MemoryWorkingSetBytes: 10, LogsBytes: 4, LogsInodes: 1, VolumeBytes: 20, VolumeInodes: 2, Volumes: map[string]uint64{"v": 20},
					Containers: []eviction.ContainerUsage{{Name: "a", MemoryWorkingSetBytes: 7}, {Name: "b", MemoryWorkingSetBytes: 3, LogsBytes: 4}}},
			},
		}},
		{"pid_max not positive", &statsapi.Summary{Node: statsapi.NodeStats{
			Rlimit: &statsapi.RlimitStats{MaxPID: i64(0), NumOfRunningProcesses: i64(3)},
		}}, &eviction.Snapshot{Time: at}},
		{"ephemeral storage below the containers' use", &statsapi.Summary{Pods: []statsapi.PodStats{{
			PodRef:           statsapi.PodReference{UID: "p"},
			Containers:       []statsapi.ContainerStats{{Name: "a", Rootfs: usedFs(10, 5)}},
			EphemeralStorage: usedFs(8, 2),
		}}}, &eviction.Snapshot{Time: at, Pods: []eviction.PodUsage{
			{UID: "p", RootfsBytes: 10, RootfsInodes: 5, Containers: []eviction.ContainerUsage{{Name: "a", RootfsBytes: 10}}},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := eviction.FromSummary(at, tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", describe(got), describe(tc.want))
			}
		})
	}
}

// describe spells out a snapshot's parts for a failure message.
func describe(s *eviction.Snapshot) map[string]any {
	return map[string]any{"time": s.Time, "memory": s.Memory, "allocatable": s.AllocatableMemory, "nodefs": s.NodeFS,
		"imagefs": s.ImageFS, "dedicated": s.DedicatedImageFS, "pids": s.PIDs, "pods": s.Pods}
}
