package usage_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/nodestatus/usage"
)

func newCollector(t *testing.T, clk *clocktesting.FakeClock, root string, mod func(*usage.Options)) *usage.Collector {
	t.Helper()
	opts := usage.Options{NodeName: "node-1", Clock: clk, HostRoot: root, RootDir: t.TempDir(), PodLogRoot: filepath.Join(root, "var/log/pods")}
	if mod != nil {
		mod(&opts)
	}
	c, err := usage.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNodeCgroupV1(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v1Files))
	clk := clocktesting.NewFakeClock(t0)
	c := newCollector(t, clk, root, nil)
	if c.Latest() != nil {
		t.Fatal("Latest before the first sample is not nil")
	}
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := c.Latest().Summary.Node
	if n.NodeName != "node-1" || !n.StartTime.Time.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("node name %q start %v", n.NodeName, n.StartTime)
	}
	if got := val(n.CPU.UsageCoreNanoSeconds); got != 50e9 {
		t.Errorf("cpu = %d, want cpuacct.usage 50e9", got)
	}
	if n.CPU.UsageNanoCores != nil {
		t.Errorf("first sample has a CPU rate %d, want none", *n.CPU.UsageNanoCores)
	}
	m := n.Memory
	if val(m.UsageBytes) != 3<<30 || val(m.WorkingSetBytes) != 2<<30 || val(m.RSSBytes) != 1610612736 {
		t.Errorf("memory usage %d working set %d rss %d, want 3Gi, 2Gi (usage - total_inactive_file), 1.5Gi", val(m.UsageBytes), val(m.WorkingSetBytes), val(m.RSSBytes))
	}
	if val(m.AvailableBytes) != 6<<30 {
		t.Errorf("available = %d, want MemTotal - working set = 6Gi", val(m.AvailableBytes))
	}
	if val(m.PageFaults) != 900 || val(m.MajorPageFaults) != 9 {
		t.Errorf("faults %d/%d, want 900/9", val(m.PageFaults), val(m.MajorPageFaults))
	}
	if n.Fs == nil || val(n.Fs.CapacityBytes) == 0 || val(n.Fs.Inodes) == 0 {
		t.Errorf("node fs %+v, want the root dir's statfs", n.Fs)
	}
	if n.Network == nil || n.Network.Name != "eth0" || val(n.Network.RxBytes) != 1000 || val(n.Network.TxErrors) != 2 || len(n.Network.Interfaces) != 2 {
		t.Errorf("network %+v, want eth0 (the default route) rx 1000 tx errors 2 and two interfaces without lo", n.Network)
	}
	if n.Rlimit == nil || *n.Rlimit.MaxPID != 62000 || *n.Rlimit.NumOfRunningProcesses != 456 {
		t.Errorf("rlimit %+v, want maxpid min(pid_max, threads-max) 62000, curproc 456", n.Rlimit)
	}

	// Ten seconds and two CPU-seconds later: 0.2 cores.
	clk.Step(10 * time.Second)
	testenv.WriteTree(t, root, map[string]string{"sys/fs/cgroup/cpuacct/cpuacct.usage": "52000000000\n"})
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	n = c.Latest().Summary.Node
	if got := val(n.CPU.UsageNanoCores); got != 200_000_000 {
		t.Errorf("cpu rate = %d nanocores, want 2e8", got)
	}
	if !n.CPU.Time.Time.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("cpu time %v, want the clock's", n.CPU.Time)
	}
	// A counter that went back (a reset) gives no rate.
	clk.Step(10 * time.Second)
	testenv.WriteTree(t, root, map[string]string{"sys/fs/cgroup/cpuacct/cpuacct.usage": "1000\n"})
	_ = c.SyncOnce(context.Background())
	if r := c.Latest().Summary.Node.CPU.UsageNanoCores; r != nil {
		t.Errorf("rate after a reset = %d, want none", *r)
	}
}

func TestNodeCgroupV2(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v2Files))
	clk := clocktesting.NewFakeClock(t0)
	c := newCollector(t, clk, root, nil)
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := c.Latest().Summary.Node
	if got := val(n.CPU.UsageCoreNanoSeconds); got != 40e9 {
		t.Errorf("cpu = %d, want cpu.stat usage_usec in ns, 40e9", got)
	}
	m := n.Memory
	// usage = MemTotal - MemFree = 7Gi; working set = 7Gi - Inactive(file) 0.5Gi.
	if val(m.UsageBytes) != 7<<30 || val(m.WorkingSetBytes) != 13<<29 || val(m.RSSBytes) != 2<<30 {
		t.Errorf("memory usage %d working set %d rss %d, want 7Gi, 6.5Gi, 2Gi", val(m.UsageBytes), val(m.WorkingSetBytes), val(m.RSSBytes))
	}
	if val(m.AvailableBytes) != 3<<29 || val(m.PageFaults) != 5000 || val(m.MajorPageFaults) != 7 {
		t.Errorf("available %d faults %d/%d, want 1.5Gi, 5000/7 from vmstat", val(m.AvailableBytes), val(m.PageFaults), val(m.MajorPageFaults))
	}
	clk.Step(5 * time.Second)
	testenv.WriteTree(t, root, map[string]string{"sys/fs/cgroup/cpu.stat": "usage_usec 45000000\n"})
	_ = c.SyncOnce(context.Background())
	if got := val(c.Latest().Summary.Node.CPU.UsageNanoCores); got != 1e9 {
		t.Errorf("cpu rate = %d, want one core", got)
	}
}

func TestNodeProcStatFallback(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, procFiles) // no cgroup files at all
	c := newCollector(t, clocktesting.NewFakeClock(t0), root, nil)
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	// user+nice+system+irq+softirq+steal = 1000+20+300+5+6+7 ticks of 10ms.
	if got := val(c.Latest().Summary.Node.CPU.UsageCoreNanoSeconds); got != 1338*10_000_000 {
		t.Errorf("cpu = %d, want /proc/stat's busy time 13.38s", got)
	}
}

func TestNodeMissingFiles(t *testing.T) {
	root := t.TempDir()
	c := newCollector(t, clocktesting.NewFakeClock(t0), root, nil)
	err := c.SyncOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "node memory") || !strings.Contains(err.Error(), "node cpu") {
		t.Fatalf("SyncOnce on an empty root: %v, want node cpu and memory errors", err)
	}
	s := c.Latest()
	if s == nil || s.Err == nil || s.Summary.Node.CPU != nil || s.Summary.Node.Network != nil {
		t.Errorf("snapshot %+v, want one published with the error and without the missing parts", s)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
}

func TestOptions(t *testing.T) {
	for name, o := range map[string]usage.Options{
		"no node name":   {},
		"short interval": {NodeName: "n", Interval: time.Millisecond},
		"long interval":  {NodeName: "n", Interval: time.Hour},
	} {
		if _, err := usage.New(o); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
}
