package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/sidebyside"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
)

// procCPU is a process's user+system CPU time.
func procCPU(pid int) time.Duration {
	t, _ := testenv.ProcCPUTicks(pid)
	return time.Duration(t) * time.Second / testenv.TicksPerSecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runtimePods starts n host-network pods of k busybox containers each
// directly over CRI (sidebyside.StartPods), par at a time, with the configs
// the nodes send (sidebyside.AsNodesSend), and returns their sandbox IDs and
// the times from the first call to each one started.
func runtimePods(t *testing.T, c *containerdtest.Containerd, rt runtime.Runtime, prefix string, n, k, par int) ([]string, []time.Duration) {
	pods := make([]sidebyside.RuntimePod, n)
	podRoot := t.TempDir()
	for i := range pods {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pods[i].Sandbox = c.SandboxConfig(name, "default", "uid-"+name)
		for j := range k {
			pods[i].Containers = append(pods[i].Containers, c.BusyboxContainer(fmt.Sprintf("c%d", j), "sh", "-c", sleeper))
		}
		if err := sidebyside.AsNodesSend(&pods[i], filepath.Join(podRoot, name), "/etc/hosts"); err != nil {
			t.Fatal(err)
		}
	}
	ids, took, err := sidebyside.StartPods(context.Background(), rt, pods, par)
	if err != nil {
		t.Error(err)
	}
	return ids, took
}

func removeRuntimePods(rt runtime.Runtime, ids []string, par int) {
	_, _, _ = sidebyside.RemovePods(context.Background(), rt, ids, par)
}

// TestMeasureRuntime measures containerd alone, with no agent, under
// NODEKIT_MEASURE=1 (hack/measure-pods.sh runs it): the time for MEASURE_PODS
// (30) one-container pods started at once straight over CRI (sandbox,
// create, start; 16 at a time, the engine's default parallelism) and
// stopped and removed again — the floor under the pod half's figures on
// this machine, by the workload internal/sidebyside's floor column runs
// too; MEASURE_PODS pods one at a time, straight over CRI and through the
// CRI syncer's SyncPod alone, taking turns (what the syncer's own calls and
// configs cost over the floor, without the engine and the API); and the
// cost of the CRI syncer's relist with 100 pods of 3
// containers: wall time and CPU of this process and of containerd per
// relist (the engine relists once a second).
func TestMeasureRuntime(t *testing.T) {
	if os.Getenv("NODEKIT_MEASURE") != "1" {
		t.Skip("set NODEKIT_MEASURE=1 (hack/measure-pods.sh) to measure the runtime")
	}
	c := containerdtest.Need(t, ctrd)
	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	n, err := testenv.EnvInt("MEASURE_PODS", 30)
	if err != nil || n < 1 {
		t.Fatalf("MEASURE_PODS: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| containerd alone (no agent) | value |\n|---|---|\n")
	// Warm-up: the first sandbox pays for the pause image's snapshot.
	warm, _ := runtimePods(t, c, rt, "warm", 1, 1, 1)
	removeRuntimePods(rt, warm, 1)

	// MEASURE_PARALLEL (the engine's default, 16) lists the parallelisms
	// to try, comma-separated, one after the other.
	parallel := []int{podsync.DefaultMaxParallel}
	if s := os.Getenv("MEASURE_PARALLEL"); s != "" {
		parallel = nil
		for _, f := range strings.Split(s, ",") {
			p, err := strconv.Atoi(f)
			if err != nil || p < 1 {
				t.Fatalf("MEASURE_PARALLEL=%q: want positive integers, comma-separated", s)
			}
			parallel = append(parallel, p)
		}
	}
	for _, p := range parallel {
		start := time.Now()
		ids, _ := runtimePods(t, c, rt, "floor", n, 1, p)
		started := time.Since(start)
		start = time.Now()
		removeRuntimePods(rt, ids, p)
		removed := time.Since(start)
		fmt.Fprintf(&b, "| %d pods started at once over CRI, %d at a time, first call to last started | %.3f s |\n", n, p, started.Seconds())
		fmt.Fprintf(&b, "| %d pods stopped and removed at once over CRI, %d at a time | %.3f s |\n", n, p, removed.Seconds())
	}

	seqFloor, seqSyncer := oneAtATime(t, c, rt, n)
	fmt.Fprintf(&b, "| %d pods one at a time over CRI, first call to started, p50 / p99 | %.3f / %.3f s |\n", n,
		testenv.Percentile(seqFloor, 0.5).Seconds(), testenv.Percentile(seqFloor, 0.99).Seconds())
	fmt.Fprintf(&b, "| the same pods through the CRI syncer's SyncPod (pod cgroups as the agent makes them), taking turns with them, p50 / p99 | %.3f / %.3f s |\n",
		testenv.Percentile(seqSyncer, 0.5).Seconds(), testenv.Percentile(seqSyncer, 0.99).Seconds())

	const pods, per, relists = 100, 3, 50
	ids, _ := runtimePods(t, c, rt, "relist", pods, per, 8)
	defer removeRuntimePods(rt, ids, 8)
	cri, err := New(Options{Runtime: rt, ResolvConf: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got, err := cri.Relist(ctx); err != nil || len(got) != pods {
		t.Fatalf("relist: %d pods, %v", len(got), err)
	}
	self0, ctrd0, wall0 := selfCPU(), procCPU(c.Pid()), time.Now()
	for range relists {
		if _, err := cri.Relist(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wall := time.Since(wall0) / relists
	self, ctrdCPU := (selfCPU()-self0)/relists, (procCPU(c.Pid())-ctrd0)/relists
	fmt.Fprintf(&b, "| relist of %d pods / %d containers: wall per relist | %.1f ms |\n", pods, pods*per, float64(wall.Microseconds())/1000)
	fmt.Fprintf(&b, "| relist: CPU of the syncer's process per relist (= %% of a core at 1 relist/s ÷ 10) | %.1f ms |\n", float64(self.Microseconds())/1000)
	fmt.Fprintf(&b, "| relist: containerd's CPU per relist | %.1f ms |\n", float64(ctrdCPU.Microseconds())/1000)
	fmt.Print(b.String())
}

// oneAtATime starts n pods one at a time straight over CRI (the floor's
// calls and configs) and n through a Syncer's SyncPod alone (no engine, no
// API: the library's own CRI calls and their configs, with pod cgroups),
// taking turns, each removed before the next starts; it returns the times
// from the first call to the pod started, the floor's and the syncer's.
func oneAtATime(t *testing.T, c *containerdtest.Containerd, rt runtime.Runtime, n int) (floor, syncer []time.Duration) {
	t.Helper()
	ctx := context.Background()
	s, err := New(Options{Runtime: rt, PodLogRoot: c.PodLogRoot, PodRoot: t.TempDir(), CgroupRoot: c.CgroupRoot, ResolvConf: "-", CgroupsPerQOS: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ids, took := runtimePods(t, c, rt, fmt.Sprintf("seq-floor-%d", i), 1, 1, 1)
		floor = append(floor, took[0])
		removeRuntimePods(rt, ids, 1)

		pod := e2ePod(c, fmt.Sprintf("seq-syncer-%d", i), corev1.RestartPolicyAlways, "sh", "-c", sleeper)
		start := time.Now()
		if _, err := s.SyncPod(ctx, pod, nil); err != nil {
			t.Fatalf("syncing %s: %v", pod.Name, err)
		}
		syncer = append(syncer, time.Since(start))
		// Torn down as the engine tears a pod down, grace 0.
		obs, err := s.RelistPod(ctx, pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SyncTerminatingPod(ctx, pod, obs, 0); err != nil {
			t.Fatal(err)
		}
		if obs, err = s.RelistPod(ctx, pod.UID); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncTerminatedPod(ctx, pod, obs); err != nil {
			t.Fatal(err)
		}
		if err := s.CleanupPod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	return floor, syncer
}
