package runtimetest

import (
	"context"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.StatsProvider = (*Runtime)(nil)

// Usage is what the fake reports a container or a pod sandbox uses. The
// zero value reports zero use.
type Usage struct {
	// CPUCoreNanoSeconds is the cumulative CPU time.
	CPUCoreNanoSeconds uint64
	// CPUNanoCores, when set, is reported as the current CPU rate; nil
	// leaves it out, as a runtime that does not compute it does.
	CPUNanoCores *uint64
	// Memory figures, in bytes and counts.
	MemoryWorkingSetBytes uint64
	MemoryUsageBytes      uint64
	MemoryRSSBytes        uint64
	MemoryAvailableBytes  uint64
	PageFaults            uint64
	MajorPageFaults       uint64
	// WritableLayerBytes and WritableLayerInodes are a container's
	// writable layer's use.
	WritableLayerBytes  uint64
	WritableLayerInodes uint64
	// Network counters of a sandbox's default interface, "eth0".
	RxBytes, RxErrors, TxBytes, TxErrors uint64
	// Processes is a sandbox's process count.
	Processes uint64
}

// statsState is the part of the fake that the stats controls set.
type statsState struct {
	containers     map[string]Usage // by container ID
	sandboxes      map[string]Usage // by sandbox ID
	noSandboxStats bool
}

// SetContainerUsage sets what ContainerStats and ListContainerStats report
// for a container from now on. A container without a usage set reports zero
// use.
func (f *Runtime) SetContainerUsage(containerID string, u Usage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(containerID)
	if err != nil {
		return err
	}
	if f.stats.containers == nil {
		f.stats.containers = map[string]Usage{}
	}
	f.stats.containers[c.status.Id] = u
	return nil
}

// SetPodSandboxUsage sets what PodSandboxStats and ListPodSandboxStats
// report for a sandbox from now on: its network counters and process count,
// and CPU and memory figures that replace the sum of its containers'.
func (f *Runtime) SetPodSandboxUsage(podSandboxID string, u Usage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(podSandboxID)
	if err != nil {
		return err
	}
	if f.stats.sandboxes == nil {
		f.stats.sandboxes = map[string]Usage{}
	}
	f.stats.sandboxes[s.status.Id] = u
	return nil
}

// SetPodSandboxStatsUnimplemented makes PodSandboxStats and
// ListPodSandboxStats answer Unimplemented (off: false), as containerd 1.6
// does.
func (f *Runtime) SetPodSandboxStatsUnimplemented(off bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.noSandboxStats = off
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// containerStats builds a container's stats, called with f.mu held. CPU and
// memory are reported only for a running container, as containerd does.
func (f *Runtime) containerStats(c *container) *runtimeapi.ContainerStats {
	now := f.now()
	u := f.stats.containers[c.status.Id]
	st := &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.status.Id,
			Metadata:    proto.Clone(c.status.Metadata).(*runtimeapi.ContainerMetadata),
			Labels:      maps.Clone(c.status.Labels),
			Annotations: maps.Clone(c.status.Annotations),
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/fake/containers"},
			UsedBytes:  u64(u.WritableLayerBytes),
			InodesUsed: u64(u.WritableLayerInodes),
		},
	}
	if c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		st.Cpu, st.Memory = cpuMem(now, u)
	}
	return st
}

func cpuMem(now int64, u Usage) (*runtimeapi.CpuUsage, *runtimeapi.MemoryUsage) {
	cpu := &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: u64(u.CPUCoreNanoSeconds)}
	if u.CPUNanoCores != nil {
		cpu.UsageNanoCores = u64(*u.CPUNanoCores)
	}
	mem := &runtimeapi.MemoryUsage{
		Timestamp:       now,
		WorkingSetBytes: u64(u.MemoryWorkingSetBytes),
		UsageBytes:      u64(u.MemoryUsageBytes),
		RssBytes:        u64(u.MemoryRSSBytes),
		AvailableBytes:  u64(u.MemoryAvailableBytes),
		PageFaults:      u64(u.PageFaults),
		MajorPageFaults: u64(u.MajorPageFaults),
	}
	return cpu, mem
}

// ContainerStats reports a container's usage as SetContainerUsage set it.
func (f *Runtime) ContainerStats(ctx context.Context, containerID string) (_ *runtimeapi.ContainerStats, err error) {
	defer f.wrap("ContainerStats", &err)
	if hook := f.enter("ContainerStats", containerID, nil).ContainerStats; hook != nil {
		if err := hook(ctx, containerID); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(containerID)
	if err != nil {
		return nil, err
	}
	return f.containerStats(c), nil
}

// ListContainerStats reports the usage of the containers matching filter
// (ID or ID prefix, sandbox, labels), oldest first.
func (f *Runtime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) (_ []*runtimeapi.ContainerStats, err error) {
	defer f.wrap("ListContainerStats", &err)
	if hook := f.enter("ListContainerStats", filter.GetId(), nil).ListContainerStats; hook != nil {
		if err := hook(ctx, filter); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetRemovedLocked()
	out := []*runtimeapi.ContainerStats{}
	for _, c := range f.sortedContainers() {
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(c.status.Id, filter.Id) {
				continue
			}
			if filter.PodSandboxId != "" && !strings.HasPrefix(c.sandboxID, filter.PodSandboxId) {
				continue
			}
			if !labelsMatch(c.status.Labels, filter.LabelSelector) {
				continue
			}
		}
		out = append(out, f.containerStats(c))
	}
	return out, nil
}

// forgetRemovedLocked drops the usage of containers and sandboxes that are
// gone.
func (f *Runtime) forgetRemovedLocked() {
	for id := range f.stats.containers {
		if _, ok := f.containers[id]; !ok {
			delete(f.stats.containers, id)
		}
	}
	for id := range f.stats.sandboxes {
		if _, ok := f.sandboxes[id]; !ok {
			delete(f.stats.sandboxes, id)
		}
	}
}

// sandboxStats builds a sandbox's stats, called with f.mu held: CPU and
// memory are what SetPodSandboxUsage set or else the sums over its running
// containers; the network and processes are reported for a ready sandbox.
func (f *Runtime) sandboxStats(s *sandbox, containers []*container) *runtimeapi.PodSandboxStats {
	now := f.now()
	st := s.status
	out := &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id:          st.Id,
			Metadata:    proto.Clone(st.Metadata).(*runtimeapi.PodSandboxMetadata),
			Labels:      maps.Clone(st.Labels),
			Annotations: maps.Clone(st.Annotations),
		},
		Linux: &runtimeapi.LinuxPodSandboxStats{},
	}
	var sum Usage
	for _, c := range containers {
		if c.sandboxID != st.Id {
			continue
		}
		cs := f.containerStats(c)
		out.Linux.Containers = append(out.Linux.Containers, cs)
		if cs.Cpu != nil {
			u := f.stats.containers[c.status.Id]
			sum.CPUCoreNanoSeconds += u.CPUCoreNanoSeconds
			sum.MemoryWorkingSetBytes += u.MemoryWorkingSetBytes
			sum.MemoryUsageBytes += u.MemoryUsageBytes
			sum.MemoryRSSBytes += u.MemoryRSSBytes
			sum.PageFaults += u.PageFaults
			sum.MajorPageFaults += u.MajorPageFaults
		}
	}
	if st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return out
	}
	u, ok := f.stats.sandboxes[st.Id]
	if !ok {
		u = sum
	}
	out.Linux.Cpu, out.Linux.Memory = cpuMem(now, u)
	iface := &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: u64(u.RxBytes), RxErrors: u64(u.RxErrors), TxBytes: u64(u.TxBytes), TxErrors: u64(u.TxErrors)}
	out.Linux.Network = &runtimeapi.NetworkUsage{Timestamp: now, DefaultInterface: iface}
	out.Linux.Process = &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: u64(u.Processes)}
	return out
}

func (f *Runtime) sandboxStatsOffLocked() error {
	if f.stats.noSandboxStats {
		return status.Error(codes.Unimplemented, "method PodSandboxStats not implemented")
	}
	return nil
}

// PodSandboxStats reports a sandbox's usage, or Unimplemented after
// SetPodSandboxStatsUnimplemented(true).
func (f *Runtime) PodSandboxStats(ctx context.Context, podSandboxID string) (_ *runtimeapi.PodSandboxStats, err error) {
	defer f.wrap("PodSandboxStats", &err)
	if hook := f.enter("PodSandboxStats", podSandboxID, nil).PodSandboxStats; hook != nil {
		if err := hook(ctx, podSandboxID); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.sandboxStatsOffLocked(); err != nil {
		return nil, err
	}
	s, err := f.sandbox(podSandboxID)
	if err != nil {
		return nil, err
	}
	return f.sandboxStats(s, f.sortedContainers()), nil
}

// ListPodSandboxStats reports the usage of the sandboxes matching filter
// (ID or ID prefix, labels), oldest first, or Unimplemented after
// SetPodSandboxStatsUnimplemented(true).
func (f *Runtime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) (_ []*runtimeapi.PodSandboxStats, err error) {
	defer f.wrap("ListPodSandboxStats", &err)
	if hook := f.enter("ListPodSandboxStats", filter.GetId(), nil).ListPodSandboxStats; hook != nil {
		if err := hook(ctx, filter); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.sandboxStatsOffLocked(); err != nil {
		return nil, err
	}
	f.forgetRemovedLocked()
	out := []*runtimeapi.PodSandboxStats{}
	bySandbox := map[string][]*container{}
	for _, c := range f.sortedContainers() {
		bySandbox[c.sandboxID] = append(bySandbox[c.sandboxID], c)
	}
	for _, s := range f.sortedSandboxes() {
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(s.status.Id, filter.Id) {
				continue
			}
			if !labelsMatch(s.status.Labels, filter.LabelSelector) {
				continue
			}
		}
		out = append(out, f.sandboxStats(s, bySandbox[s.status.Id]))
	}
	return out, nil
}

func (f *Runtime) sortedSandboxes() []*sandbox {
	ss := slices.Collect(maps.Values(f.sandboxes))
	slices.SortFunc(ss, func(a, b *sandbox) int { return a.seq - b.seq })
	return ss
}

// --- the server's stats calls ---

// ContainerStats serves the CRI call ContainerStats.
func (s *Server) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	st, err := s.rt.ContainerStats(ctx, req.ContainerId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}

// ListContainerStats serves the CRI call ListContainerStats.
func (s *Server) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	st, err := s.rt.ListContainerStats(ctx, req.Filter)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: st}, nil
}

// PodSandboxStats serves the CRI call PodSandboxStats.
func (s *Server) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	st, err := s.rt.PodSandboxStats(ctx, req.PodSandboxId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

// ListPodSandboxStats serves the CRI call ListPodSandboxStats.
func (s *Server) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	st, err := s.rt.ListPodSandboxStats(ctx, req.Filter)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: st}, nil
}
