package usage_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// runPod runs a sandbox with running containers in the fake and returns the
// sandbox ID and the containers' IDs by name.
func runPod(t testing.TB, f *runtimetest.Runtime, ns, name, uid string, containers ...string) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid}}
	sb, err := f.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range containers {
		id, err := f.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c},
			Image:    &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage},
			Labels:   map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": c},
		}, sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids[c] = id
	}
	return sb, ids
}

func findPod(s *statsapi.Summary, name string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	return nil
}

func findContainer(p *statsapi.PodStats, name string) *statsapi.ContainerStats {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	return nil
}

func TestPodsFromRuntime(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v1Files))
	clk := clocktesting.NewFakeClock(t0)
	f := runtimetest.New(runtimetest.Options{Clock: clk})
	sb, ids := runPod(t, f, "default", "web", "uid-web", "app", "sidecar")
	_, ids2 := runPod(t, f, "kube-system", "dns", "uid-dns", "coredns")
	rate := uint64(123)
	must(t, f.SetContainerUsage(ids["app"], runtimetest.Usage{CPUCoreNanoSeconds: 1e9, MemoryWorkingSetBytes: 10 << 20, MemoryUsageBytes: 12 << 20, WritableLayerBytes: 4096, WritableLayerInodes: 3}))
	must(t, f.SetContainerUsage(ids["sidecar"], runtimetest.Usage{CPUCoreNanoSeconds: 2e9, MemoryWorkingSetBytes: 5 << 20}))
	must(t, f.SetContainerUsage(ids2["coredns"], runtimetest.Usage{CPUCoreNanoSeconds: 3e9, CPUNanoCores: &rate, MemoryWorkingSetBytes: 1 << 20}))
	must(t, f.SetPodSandboxUsage(sb, runtimetest.Usage{CPUCoreNanoSeconds: 4e9, MemoryWorkingSetBytes: 20 << 20, RxBytes: 77, Processes: 4}))
	logRoot := filepath.Join(root, "var/log/pods")
	testenv.WriteTree(t, logRoot, map[string]string{
		"default_web_uid-web/app/0.log":                 "0123456789",
		"default_web_uid-web/app/0.log.20260301-120000": "01234",
	})

	c := newCollector(t, clk, root, func(o *usage.Options) { o.Runtime = f })
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := c.Latest().Summary
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Namespace != "default" || s.Pods[1].PodRef.Namespace != "kube-system" {
		t.Fatalf("pods %+v, want default/web and kube-system/dns in that order", s.Pods)
	}
	web := findPod(s, "web")
	if web.PodRef.UID != "uid-web" || !web.StartTime.Time.Equal(t0) || len(web.Containers) != 2 {
		t.Errorf("web pod %+v", web)
	}
	// Pod figures from the sandbox stats, not the sums.
	if val(web.CPU.UsageCoreNanoSeconds) != 4e9 || val(web.Memory.WorkingSetBytes) != 20<<20 {
		t.Errorf("web pod cpu %d memory %d, want the sandbox's 4e9 and 20Mi", val(web.CPU.UsageCoreNanoSeconds), val(web.Memory.WorkingSetBytes))
	}
	if web.Network == nil || val(web.Network.RxBytes) != 77 || web.ProcessStats == nil || val(web.ProcessStats.ProcessCount) != 4 {
		t.Errorf("web pod network %+v processes %+v", web.Network, web.ProcessStats)
	}
	app := findContainer(web, "app")
	if val(app.CPU.UsageCoreNanoSeconds) != 1e9 || val(app.Memory.WorkingSetBytes) != 10<<20 || val(app.Memory.UsageBytes) != 12<<20 {
		t.Errorf("app cpu %+v memory %+v", app.CPU, app.Memory)
	}
	if app.Rootfs == nil || val(app.Rootfs.UsedBytes) != 4096 || val(app.Rootfs.InodesUsed) != 3 {
		t.Errorf("app rootfs %+v, want the writable layer's 4096 bytes, 3 inodes", app.Rootfs)
	}
	if app.Logs == nil || val(app.Logs.UsedBytes) != 15 || val(app.Logs.CapacityBytes) == 0 {
		t.Errorf("app logs %+v, want 15 bytes in two files with the node fs's capacity", app.Logs)
	}
	if web.EphemeralStorage == nil || val(web.EphemeralStorage.UsedBytes) != 4096+15 {
		t.Errorf("web ephemeral storage %+v, want writable layers + logs = 4111", web.EphemeralStorage)
	}
	if dns := findPod(s, "dns"); val(dns.Containers[0].CPU.UsageNanoCores) != 123 {
		t.Errorf("coredns rate %v, want the runtime's 123", dns.Containers[0].CPU.UsageNanoCores)
	}
	if s.Node.Runtime == nil || val(s.Node.Runtime.ImageFs.UsedBytes) != runtimetest.PauseImageSize+runtimetest.BusyboxImageSize {
		t.Errorf("image fs %+v, want the fake's image sizes", s.Node.Runtime)
	}

	// Rates between samples; an exited container leaves the pod.
	clk.Step(10 * time.Second)
	must(t, f.SetContainerUsage(ids["app"], runtimetest.Usage{CPUCoreNanoSeconds: 6e9, MemoryWorkingSetBytes: 10 << 20}))
	must(t, f.SetPodSandboxUsage(sb, runtimetest.Usage{CPUCoreNanoSeconds: 9e9}))
	must(t, f.Exit(ids["sidecar"], 0))
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	web = findPod(c.Latest().Summary, "web")
	if len(web.Containers) != 1 || web.Containers[0].Name != "app" {
		t.Fatalf("web containers %+v, want app alone", web.Containers)
	}
	if got := val(web.Containers[0].CPU.UsageNanoCores); got != 5e8 {
		t.Errorf("app rate = %d, want 5 CPU-seconds in 10s = 5e8", got)
	}
	if got := val(web.CPU.UsageNanoCores); got != 5e8 {
		t.Errorf("pod rate = %d, want 5e8", got)
	}
}

func TestPodsFromTheirCgroups(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v1Files))
	cg := t.TempDir()
	testenv.WriteTree(t, cg, map[string]string{
		// cgroup v1: a pod's cpuacct and memory directories.
		"v1/cpuacct/kubepods/podA/cpuacct.usage":        "7000000000\n",
		"v1/memory/kubepods/podA/memory.usage_in_bytes": "104857600\n",
		"v1/memory/kubepods/podA/memory.stat":           "total_inactive_file 20971520\ntotal_rss 52428800\ntotal_pgfault 10\ntotal_pgmajfault 1\n",
		"v1/memory/kubepods/podA/memory.limit_in_bytes": "209715200\n",
		// cgroup v2: one directory.
		"v2/kubepods/podB/cpu.stat":       "usage_usec 3000000\n",
		"v2/kubepods/podB/memory.current": "52428800\n",
		"v2/kubepods/podB/memory.stat":    "anon 1048576\ninactive_file 10485760\npgfault 3\npgmajfault 0\n",
		"v2/kubepods/podB/memory.max":     "max\n",
		"v2/kubepods/podB/pids.current":   "6\n",
		// Their processes: pod a's in a network namespace of its own (the
		// pause container's cgroup, below the pod's), pod b's in the host's.
		"v1/cpuacct/kubepods/podA/pause/cgroup.procs": "4242\n",
		"v2/kubepods/podB/app/cgroup.procs":           "4343\n",
	})
	testenv.WriteTree(t, root, map[string]string{
		"proc/1/ns/net":     "host\n",
		"proc/4242/ns/net":  "pod a\n",
		"proc/4242/net/dev": "Inter-|   Receive  |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 9 1 0 0 0 0 0 0 9 1 0 0 0 0 0 0\n  eth0: 1000 10 2 0 0 0 0 0 3000 30 4 0 0 0 0 0\n",
		"proc/4343/net/dev": "  eth0: 5 5 5 0 0 0 0 0 5 5 5 0 0 0 0 0\n",
	})
	if err := os.MkdirAll(filepath.Join(root, "proc/4343/ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "proc/1/ns/net"), filepath.Join(root, "proc/4343/ns/net")); err != nil {
		t.Fatal(err)
	}
	dirs := map[string][]string{
		"uid-a": {filepath.Join(cg, "v1/cpuacct/kubepods/podA"), filepath.Join(cg, "v1/memory/kubepods/podA")},
		"uid-b": {filepath.Join(cg, "v2/kubepods/podB")},
	}
	clk := clocktesting.NewFakeClock(t0)
	f := runtimetest.New(runtimetest.Options{Clock: clk})
	f.SetPodSandboxStatsUnimplemented(true)
	runPod(t, f, "ns", "a", "uid-a", "c")
	runPod(t, f, "ns", "b", "uid-b", "c")
	_, ids := runPod(t, f, "ns", "c", "uid-c", "c1", "c2")
	must(t, f.SetContainerUsage(ids["c1"], runtimetest.Usage{CPUCoreNanoSeconds: 1e9, MemoryWorkingSetBytes: 1 << 20, MemoryUsageBytes: 2 << 20}))
	must(t, f.SetContainerUsage(ids["c2"], runtimetest.Usage{CPUCoreNanoSeconds: 2e9, MemoryWorkingSetBytes: 3 << 20, MemoryUsageBytes: 3 << 20}))

	lookups := 0
	c := newCollector(t, clk, root, func(o *usage.Options) {
		o.Runtime = f
		o.PodCgroupDirs = func(uid string) []string { lookups++; return dirs[uid] }
	})
	sandboxStatsCalls := func(f *runtimetest.Runtime) int { return f.CallCount("ListPodSandboxStats") }
	for range 2 { // the second sample does not ask for sandbox stats again
		if err := c.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if lookups != 3 {
		t.Errorf("PodCgroupDirs called %d times for three pods over two samples, want once a pod", lookups)
	}
	if n := sandboxStatsCalls(f); n != 1 {
		t.Errorf("ListPodSandboxStats called %d times for pod c, which has no cgroup, want once (Unimplemented is remembered)", n)
	}
	// Every pod with a cgroup: sandbox stats are not asked for, though the
	// runtime has them.
	f2 := runtimetest.New(runtimetest.Options{Clock: clk})
	runPod(t, f2, "ns", "a", "uid-a", "c")
	runPod(t, f2, "ns", "b", "uid-b", "c")
	c2 := newCollector(t, clk, root, func(o *usage.Options) {
		o.Runtime = f2
		o.PodCgroupDirs = func(uid string) []string { return dirs[uid] }
	})
	if err := c2.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := sandboxStatsCalls(f2); n != 0 {
		t.Errorf("ListPodSandboxStats called %d times with every pod's cgroup to read, want none", n)
	}
	if a2 := findPod(c2.Latest().Summary, "a"); val(a2.CPU.UsageCoreNanoSeconds) != 7e9 || a2.Network == nil {
		t.Errorf("pod a with sandbox stats at hand: cpu %+v network %+v, want its cgroup's and its process's", a2.CPU, a2.Network)
	}
	s := c.Latest().Summary
	a, b, cc := findPod(s, "a"), findPod(s, "b"), findPod(s, "c")
	if val(a.CPU.UsageCoreNanoSeconds) != 7e9 || val(a.Memory.WorkingSetBytes) != 80<<20 || val(a.Memory.AvailableBytes) != 120<<20 || val(a.Memory.RSSBytes) != 50<<20 {
		t.Errorf("pod a (cgroup v1) cpu %d ws %d avail %d rss %d, want 7e9, 80Mi, 120Mi, 50Mi",
			val(a.CPU.UsageCoreNanoSeconds), val(a.Memory.WorkingSetBytes), val(a.Memory.AvailableBytes), val(a.Memory.RSSBytes))
	}
	if val(b.CPU.UsageCoreNanoSeconds) != 3e9 || val(b.Memory.WorkingSetBytes) != 40<<20 || b.Memory.AvailableBytes != nil || val(b.ProcessStats.ProcessCount) != 6 {
		t.Errorf("pod b (cgroup v2) cpu %d ws %d avail %v, want 3e9, 40Mi, no limit; processes %+v",
			val(b.CPU.UsageCoreNanoSeconds), val(b.Memory.WorkingSetBytes), b.Memory.AvailableBytes, b.ProcessStats)
	}
	if a.Network == nil || a.Network.InterfaceStats.Name != "eth0" || val(a.Network.RxBytes) != 1000 || val(a.Network.TxErrors) != 4 || len(a.Network.Interfaces) != 1 {
		t.Errorf("pod a network %+v, want eth0 alone with rx 1000 bytes and 4 tx errors", a.Network)
	}
	if b.Network != nil || cc.Network != nil {
		t.Errorf("pod b (host network) network %+v, pod c (no cgroup) %+v: want none", b.Network, cc.Network)
	}
	if val(cc.CPU.UsageCoreNanoSeconds) != 3e9 || val(cc.Memory.WorkingSetBytes) != 4<<20 || val(cc.Memory.UsageBytes) != 5<<20 {
		t.Errorf("pod c (no cgroup) cpu %d ws %d usage %d, want the containers' sums 3e9, 4Mi, 5Mi",
			val(cc.CPU.UsageCoreNanoSeconds), val(cc.Memory.WorkingSetBytes), val(cc.Memory.UsageBytes))
	}

	// A pod found in the host's network namespace is not looked at again:
	// were pod b's process now in a namespace of its own, the next sample
	// would still give it no network figures.
	if err := os.Remove(filepath.Join(root, "proc/4343/ns/net")); err != nil {
		t.Fatal(err)
	}
	testenv.WriteTree(t, root, map[string]string{"proc/4343/ns/net": "pod b\n"})
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := findPod(c.Latest().Summary, "b"); b.Network != nil {
		t.Errorf("pod b (host network) network on a later sample %+v, want none without looking again", b.Network)
	}
	// Pod a's process, in a namespace of its own, is read every sample.
	testenv.WriteTree(t, root, map[string]string{"proc/4242/net/dev": "  eth0: 2000 10 2 0 0 0 0 0 3000 30 4 0 0 0 0 0\n"})
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := findPod(c.Latest().Summary, "a"); a.Network == nil || val(a.Network.RxBytes) != 2000 {
		t.Errorf("pod a network on a later sample %+v, want rx 2000 bytes", a.Network)
	}

	// A pod's cgroup version is learned at its first read and the other
	// version's files are not opened again: a cgroup v1 file in pod b's v2
	// directory is not read.
	testenv.WriteTree(t, cg, map[string]string{"v2/kubepods/podB/cpuacct.usage": "1\n"})
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := findPod(c.Latest().Summary, "b"); val(b.CPU.UsageCoreNanoSeconds) != 3e9 {
		t.Errorf("pod b (cgroup v2) cpu %d with a v1 file beside its v2 files, want cpu.stat's 3e9", val(b.CPU.UsageCoreNanoSeconds))
	}
}

func TestRuntimeErrorIsReported(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v1Files))
	clk := clocktesting.NewFakeClock(t0)
	f := runtimetest.New(runtimetest.Options{Clock: clk})
	fail := runtimetest.Errors(context.DeadlineExceeded)
	f.SetHooks(runtimetest.Hooks{ListContainerStats: func(context.Context, *runtimeapi.ContainerStatsFilter) error { return fail() }})
	c := newCollector(t, clk, root, func(o *usage.Options) { o.Runtime = f })
	if err := c.SyncOnce(context.Background()); err == nil {
		t.Fatal("SyncOnce with a failing runtime: nil error")
	}
	if s := c.Latest(); s.Err == nil || s.Summary.Node.CPU == nil {
		t.Errorf("snapshot %+v: want the error and the node's figures", s)
	}
}

func TestRun(t *testing.T) {
	defer leakcheck.Check(t)()
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v1Files))
	clk := clocktesting.NewFakeClock(t0)
	c := newCollector(t, clk, root, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the first sample, and Run waiting on the clock", func() bool { return c.Latest() != nil && clk.HasWaiters() })
	if !c.Latest().Time.Equal(t0) {
		t.Errorf("first sample at %v, want at once", c.Latest().Time)
	}
	clk.Step(usage.DefaultInterval)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the sample of the next interval", func() bool { return c.Latest().Time.Equal(t0.Add(usage.DefaultInterval)) })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A pod's volumes on disk (Options.PodVolumeDirs) are its VolumeStats and
// count in its ephemeral storage.
func TestPodVolumeStats(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v1Files))
	vols := t.TempDir()
	testenv.WriteTree(t, vols, map[string]string{
		"scratch/a":     strings.Repeat("x", 3000),
		"scratch/sub/b": strings.Repeat("y", 1000),
		"config/key":    "value",
	})
	clk := clocktesting.NewFakeClock(t0)
	f := runtimetest.New(runtimetest.Options{Clock: clk})
	runPod(t, f, "ns", "a", "uid-a", "c")
	c := newCollector(t, clk, root, func(o *usage.Options) {
		o.Runtime = f
		o.PodVolumeDirs = func(uid string) map[string]string {
			if uid != "uid-a" {
				return nil
			}
			return map[string]string{"scratch": filepath.Join(vols, "scratch"), "config": filepath.Join(vols, "config"), "gone": filepath.Join(vols, "gone")}
		}
	})
	if err := c.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := findPod(c.Latest().Summary, "a")
	got := map[string]uint64{}
	for _, v := range p.VolumeStats {
		got[v.Name] = val(v.UsedBytes)
	}
	if want := map[string]uint64{"scratch": 4000, "config": 5}; !maps.Equal(got, want) {
		t.Errorf("volume stats %v; want %v (a volume whose directory is gone has none)", got, want)
	}
	if e := val(p.EphemeralStorage.UsedBytes); e < 4005 {
		t.Errorf("ephemeral storage %d bytes; want at least the volumes' 4005", e)
	}

	// The figures are kept for VolumeInterval (1m), with the time they
	// were taken, as the kubelet's volumeStatsAggPeriod; then measured
	// again.
	testenv.WriteTree(t, vols, map[string]string{"scratch/c": strings.Repeat("z", 2000)})
	scratch := func() (uint64, time.Time) {
		t.Helper()
		if err := c.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, v := range findPod(c.Latest().Summary, "a").VolumeStats {
			if v.Name == "scratch" {
				return val(v.UsedBytes), v.Time.Time
			}
		}
		t.Fatal("no scratch volume")
		return 0, time.Time{}
	}
	clk.Step(usage.DefaultVolumeInterval - time.Second)
	if used, at := scratch(); used != 4000 || !at.Equal(t0) {
		t.Errorf("scratch within the interval: %d bytes at %v; want the first figures, 4000 at %v", used, at, t0)
	}
	clk.Step(time.Second)
	if used, at := scratch(); used != 6000 || !at.Equal(clk.Now()) {
		t.Errorf("scratch after the interval: %d bytes at %v; want 6000 at %v", used, at, clk.Now())
	}
	if _, err := usage.New(usage.Options{NodeName: "n", Runtime: f, VolumeInterval: time.Hour}); err == nil || !strings.Contains(err.Error(), "Options.VolumeInterval") {
		t.Errorf("VolumeInterval 1h: %v; want an error naming it", err)
	}
}

// A container of a pod with a cgroup has its CPU and memory read from its
// own cgroup, the directory of its ID below the pod's; the runtime's
// container stats are asked for the writable layers every VolumeInterval
// (the samples between report the last ones, with their time), and at
// every sample where a running container has no cgroup figures.
func TestContainersFromTheirCgroups(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, merge(procFiles, v2Files))
	cg := t.TempDir()
	clk := clocktesting.NewFakeClock(t0)
	f := runtimetest.New(runtimetest.Options{Clock: clk})
	_, ids := runPod(t, f, "ns", "a", "uid-a", "app")
	podDir := filepath.Join(cg, "kubepods/podA")
	ctrFiles := func(usec, current string) map[string]string {
		return map[string]string{
			"kubepods/podA/cpu.stat":                          "usage_usec 9000000\n",
			"kubepods/podA/memory.current":                    "104857600\n",
			"kubepods/podA/memory.stat":                       "anon 1048576\ninactive_file 0\n",
			"kubepods/podA/" + ids["app"] + "/cpu.stat":       "usage_usec " + usec + "\n",
			"kubepods/podA/" + ids["app"] + "/memory.current": current + "\n",
			"kubepods/podA/" + ids["app"] + "/memory.stat":    "anon 1048576\ninactive_file 1048576\npgfault 5\npgmajfault 1\n",
		}
	}
	testenv.WriteTree(t, cg, ctrFiles("2000000", "8388608"))
	must(t, f.SetContainerUsage(ids["app"], runtimetest.Usage{CPUCoreNanoSeconds: 7e9, MemoryWorkingSetBytes: 50 << 20, WritableLayerBytes: 4096, WritableLayerInodes: 2}))
	dirs := map[string][]string{"uid-a": {podDir}}
	c := newCollector(t, clk, root, func(o *usage.Options) {
		o.Runtime = f
		o.PodCgroupDirs = func(uid string) []string { return dirs[uid] }
	})
	sample := func() *statsapi.Summary {
		t.Helper()
		if err := c.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		return c.Latest().Summary
	}
	statsCalls := func() int { return f.CallCount("ListContainerStats") }

	s := sample()
	app := findContainer(findPod(s, "a"), "app")
	if val(app.CPU.UsageCoreNanoSeconds) != 2e9 || val(app.Memory.WorkingSetBytes) != 7<<20 || val(app.Memory.PageFaults) != 5 {
		t.Errorf("first sample: app cpu %d ws %d faults %d, want its cgroup's 2e9, 7Mi, 5", val(app.CPU.UsageCoreNanoSeconds), val(app.Memory.WorkingSetBytes), val(app.Memory.PageFaults))
	}
	if app.Rootfs == nil || val(app.Rootfs.UsedBytes) != 4096 || !app.Rootfs.Time.Time.Equal(t0) {
		t.Errorf("first sample: app rootfs %+v, want the runtime's 4096 bytes at %v", app.Rootfs, t0)
	}
	if n := statsCalls(); n != 1 {
		t.Fatalf("first sample: ListContainerStats called %d times, want once (the writable layers)", n)
	}

	// A sample later: no container stats asked; the layer as before.
	testenv.WriteTree(t, cg, ctrFiles("3000000", "8388608"))
	clk.Step(usage.DefaultInterval)
	s = sample()
	app = findContainer(findPod(s, "a"), "app")
	if n := statsCalls(); n != 1 {
		t.Errorf("second sample: ListContainerStats called %d times in all, want still once", n)
	}
	if val(app.CPU.UsageCoreNanoSeconds) != 3e9 || app.CPU.UsageNanoCores == nil || val(app.CPU.UsageNanoCores) != 1e8 {
		t.Errorf("second sample: app cpu %d, rate %d, want 3e9 and 1e8 (1 s over 10 s)", val(app.CPU.UsageCoreNanoSeconds), val(app.CPU.UsageNanoCores))
	}
	if app.Rootfs == nil || val(app.Rootfs.UsedBytes) != 4096 || !app.Rootfs.Time.Time.Equal(t0) {
		t.Errorf("second sample: app rootfs %+v, want the last listed, of %v", app.Rootfs, t0)
	}

	// VolumeInterval after the first: the layers are listed again.
	clk.SetTime(t0.Add(usage.DefaultVolumeInterval))
	s = sample()
	if n := statsCalls(); n != 2 {
		t.Errorf("a VolumeInterval on: ListContainerStats called %d times in all, want twice", n)
	}
	if app = findContainer(findPod(s, "a"), "app"); app.Rootfs == nil || !app.Rootfs.Time.Time.Equal(t0.Add(usage.DefaultVolumeInterval)) {
		t.Errorf("a VolumeInterval on: app rootfs %+v, want one of this sample", app.Rootfs)
	}

	// A container without a cgroup (its pod has none): container stats at
	// every sample, its figures the runtime's.
	_, ids2 := runPod(t, f, "ns", "b", "uid-b", "web")
	must(t, f.SetContainerUsage(ids2["web"], runtimetest.Usage{CPUCoreNanoSeconds: 4e9, MemoryWorkingSetBytes: 3 << 20}))
	clk.Step(usage.DefaultInterval)
	s = sample()
	if n := statsCalls(); n != 3 {
		t.Errorf("with a container without a cgroup: ListContainerStats called %d times in all, want 3", n)
	}
	if web := findContainer(findPod(s, "b"), "web"); val(web.CPU.UsageCoreNanoSeconds) != 4e9 || val(web.Memory.WorkingSetBytes) != 3<<20 {
		t.Errorf("web cpu %d ws %d, want the runtime's 4e9, 3Mi", val(web.CPU.UsageCoreNanoSeconds), val(web.Memory.WorkingSetBytes))
	}
	if app = findContainer(findPod(s, "a"), "app"); val(app.CPU.UsageCoreNanoSeconds) != 3e9 {
		t.Errorf("app cpu %d beside web, want its cgroup's 3e9", val(app.CPU.UsageCoreNanoSeconds))
	}

	// A container whose cgroup is gone: the runtime's figures.
	if err := os.RemoveAll(filepath.Join(podDir, ids["app"])); err != nil {
		t.Fatal(err)
	}
	clk.Step(usage.DefaultInterval)
	s = sample()
	if app = findContainer(findPod(s, "a"), "app"); val(app.CPU.UsageCoreNanoSeconds) != 7e9 || val(app.Memory.WorkingSetBytes) != 50<<20 {
		t.Errorf("app without its cgroup: cpu %d ws %d, want the runtime's 7e9, 50Mi", val(app.CPU.UsageCoreNanoSeconds), val(app.Memory.WorkingSetBytes))
	}
}
