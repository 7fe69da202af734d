package contract

import (
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// statsUsage is what the suite gives a fake's container, so that the
// figures it reads back are known.
var statsUsage = runtimetest.Usage{
	CPUCoreNanoSeconds:    1_500_000_000,
	MemoryWorkingSetBytes: 3 << 20,
	MemoryUsageBytes:      4 << 20,
	WritableLayerBytes:    8192,
	WritableLayerInodes:   2,
}

// containerStats checks ContainerStats and ListContainerStats of a running
// container: its attributes, CPU and memory with a timestamp, its writable
// layer, the list filters, and an error for a missing container.
func (s *suite) containerStats() {
	sb, id := s.runningContainer()
	if f := s.target.Fake; f != nil {
		if err := f.SetContainerUsage(id, statsUsage); err != nil {
			s.t.Fatal(err)
		}
	}
	st, err := s.rt.ContainerStats(s.ctx, id)
	if err != nil {
		s.t.Fatalf("ContainerStats: %v", err)
	}
	if st.GetAttributes().GetId() != id || st.GetAttributes().GetMetadata().GetName() != "main" {
		s.t.Errorf("ContainerStats attributes = %v, want id %s, name main", st.GetAttributes(), id)
	}
	if st.GetAttributes().GetLabels()[runLabel] != s.run {
		s.t.Errorf("ContainerStats labels = %v, want %s=%s", st.GetAttributes().GetLabels(), runLabel, s.run)
	}
	cpu, mem := st.GetCpu(), st.GetMemory()
	if cpu.GetTimestamp() == 0 || cpu.GetUsageCoreNanoSeconds() == nil {
		s.t.Errorf("ContainerStats CPU = %v, want a timestamp and cumulative usage", cpu)
	}
	if mem.GetTimestamp() == 0 || mem.GetWorkingSetBytes().GetValue() == 0 {
		s.t.Errorf("ContainerStats memory = %v, want a timestamp and a working set", mem)
	}
	if s.target.Fake != nil {
		if got := cpu.GetUsageCoreNanoSeconds().GetValue(); got != statsUsage.CPUCoreNanoSeconds {
			s.t.Errorf("fake's CPU = %d, want %d", got, statsUsage.CPUCoreNanoSeconds)
		}
		if got := st.GetWritableLayer().GetUsedBytes().GetValue(); got != statsUsage.WritableLayerBytes {
			s.t.Errorf("fake's writable layer = %d bytes, want %d", got, statsUsage.WritableLayerBytes)
		}
	}
	if st.GetWritableLayer() == nil {
		s.t.Errorf("ContainerStats has no writable layer")
	}
	for name, filter := range map[string]*runtimeapi.ContainerStatsFilter{
		"id":      {Id: id},
		"sandbox": {PodSandboxId: sb},
		"labels":  {LabelSelector: map[string]string{runLabel: s.run}},
	} {
		list, err := s.rt.ListContainerStats(s.ctx, filter)
		if err != nil {
			s.t.Fatalf("ListContainerStats(%s): %v", name, err)
		}
		got := make([]string, 0, len(list))
		for _, cs := range list {
			got = append(got, cs.GetAttributes().GetId())
		}
		if !slices.Equal(got, []string{id}) {
			s.t.Errorf("ListContainerStats(%s) = %v, want [%s]", name, got, id)
		}
	}
	if _, err := s.rt.ContainerStats(s.ctx, missingContainer); err == nil {
		s.t.Errorf("ContainerStats(missing): nil error, want one")
	}
}

// podSandboxStats checks PodSandboxStats and ListPodSandboxStats where the
// runtime has them (a skip where it answers Unimplemented): attributes, the
// sandbox's containers, CPU and memory.
func (s *suite) podSandboxStats() {
	sb, id := s.runningContainer()
	st, err := s.rt.PodSandboxStats(s.ctx, sb)
	if runtime.IsUnimplemented(err) {
		s.t.Skipf("PodSandboxStats is Unimplemented: %v", err)
	}
	if err != nil {
		s.t.Fatalf("PodSandboxStats: %v", err)
	}
	if st.GetAttributes().GetId() != sb {
		s.t.Errorf("PodSandboxStats attributes = %v, want id %s", st.GetAttributes(), sb)
	}
	if !slices.ContainsFunc(st.GetLinux().GetContainers(), func(c *runtimeapi.ContainerStats) bool { return c.GetAttributes().GetId() == id }) {
		s.t.Errorf("PodSandboxStats containers = %v, want %s among them", st.GetLinux().GetContainers(), id)
	}
	if st.GetLinux().GetCpu().GetTimestamp() == 0 || st.GetLinux().GetMemory().GetTimestamp() == 0 {
		s.t.Errorf("PodSandboxStats CPU %v, memory %v: want both with timestamps", st.GetLinux().GetCpu(), st.GetLinux().GetMemory())
	}
	list, err := s.rt.ListPodSandboxStats(s.ctx, &runtimeapi.PodSandboxStatsFilter{LabelSelector: map[string]string{runLabel: s.run}})
	if err != nil {
		s.t.Fatalf("ListPodSandboxStats: %v", err)
	}
	if len(list) != 1 || list[0].GetAttributes().GetId() != sb {
		s.t.Errorf("ListPodSandboxStats = %d items, want the one sandbox %s", len(list), sb)
	}
	if _, err := s.rt.PodSandboxStats(s.ctx, missingSandbox); err == nil {
		s.t.Errorf("PodSandboxStats(missing): nil error, want one")
	}
}
