package runtimetest_test

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

var statsTestTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestFakeStats(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{Clock: clocktesting.NewFakeClock(statsTestTime)})
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u1"}}
	sb, err := f.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"a", "b"} {
		id, err := f.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}, sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := f.SetContainerUsage(id, runtimetest.Usage{CPUCoreNanoSeconds: 10, MemoryWorkingSetBytes: 100}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	st, err := f.PodSandboxStats(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Linux.Cpu.UsageCoreNanoSeconds.Value; got != 20 {
		t.Errorf("sandbox CPU = %d, want the containers' sum 20", got)
	}
	if got := st.Linux.Memory.WorkingSetBytes.Value; got != 200 {
		t.Errorf("sandbox working set = %d, want 200", got)
	}
	if st.Linux.Memory.Timestamp != statsTestTime.UnixNano() {
		t.Errorf("timestamp %d, want the clock's %d", st.Linux.Memory.Timestamp, statsTestTime.UnixNano())
	}
	// An exited container reports no CPU or memory and leaves the sum.
	if err := f.Exit(ids[1], 0); err != nil {
		t.Fatal(err)
	}
	if cs, _ := f.ContainerStats(ctx, ids[1]); cs.Cpu != nil || cs.Memory != nil {
		t.Errorf("exited container's stats %v, want no CPU or memory", cs)
	}
	if err := f.SetPodSandboxUsage(sb, runtimetest.Usage{CPUCoreNanoSeconds: 99, RxBytes: 5}); err != nil {
		t.Fatal(err)
	}
	list, err := f.ListPodSandboxStats(ctx, nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListPodSandboxStats = %v, %v", list, err)
	}
	if got := list[0].Linux.Cpu.UsageCoreNanoSeconds.Value; got != 99 {
		t.Errorf("sandbox CPU = %d, want the set 99", got)
	}
	if got := list[0].Linux.Network.DefaultInterface.RxBytes.Value; got != 5 {
		t.Errorf("sandbox rx = %d, want 5", got)
	}
	f.SetPodSandboxStatsUnimplemented(true)
	if _, err := f.ListPodSandboxStats(ctx, nil); !runtime.IsUnimplemented(err) {
		t.Errorf("ListPodSandboxStats after SetPodSandboxStatsUnimplemented: %v, want Unimplemented", err)
	}
	if _, err := f.PodSandboxStats(ctx, sb); !runtime.IsUnimplemented(err) {
		t.Errorf("PodSandboxStats after SetPodSandboxStatsUnimplemented: %v, want Unimplemented", err)
	}
	if err := f.SetContainerUsage("missing", runtimetest.Usage{}); !runtime.IsNotFound(err) {
		t.Errorf("SetContainerUsage(missing) = %v, want NotFound", err)
	}
}
