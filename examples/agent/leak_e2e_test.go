package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// leakFootprint is what pod lifecycles could leak: the agent's goroutines,
// open files and Go heap, and the machine's cgroups, mounts, network
// namespaces, container log files and pod directories.
type leakFootprint struct {
	goroutines, fds, heapInUse int
	cgroups, mounts, netns     int
	logFiles, podDirs          int
}

func (f leakFootprint) String() string {
	return fmt.Sprintf("goroutines %d, open fds %d, heap in use %.1f MiB, cgroups %d, mounts %d, netns %d, log files %d, pod dirs %d",
		f.goroutines, f.fds, float64(f.heapInUse)/(1<<20), f.cgroups, f.mounts, f.netns, f.logFiles, f.podDirs)
}

// machine reports whether the machine's part of f equals base's.
func (f leakFootprint) machine() [5]int {
	return [5]int{f.cgroups, f.mounts, f.netns, f.logFiles, f.podDirs}
}

// Pod lifecycles leak nothing: NODEKIT_LEAK_CYCLES (20 under make test;
// hack/soak-leaks.sh runs 1,000) pods are created and deleted ten at a time
// through the API server, and afterwards the agent's goroutines and open
// files are back at their baseline (within 2), its heap within a bound that
// allows for the event recorder's bounded caches, and
// the machine holds exactly the cgroups, mounts, network namespaces, log
// files and pod directories it held before.
func TestAgentLeaksNothingOverPodCycles(t *testing.T) {
	cp := controlplane.Need(t, cp)
	onBothRuntimes(t, func(t *testing.T, c *containerdtest.Containerd, suffix string) { leaksNothing(t, cp, c, suffix) })
}

func leaksNothing(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	cycles := 20
	if s := os.Getenv("NODEKIT_LEAK_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("NODEKIT_LEAK_CYCLES=%q: want a number of at least 10", s)
		}
		cycles = n
	}
	const batch = 10
	rounds := (cycles + batch - 1) / batch
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*time.Minute+2*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()

	node := "e2e-leaks" + suffix
	rootDir := t.TempDir()
	args := podArgs(t, c, t.TempDir())
	for i, a := range args {
		if strings.HasPrefix(a, "--root-dir=") {
			args[i] = "--root-dir=" + rootDir
		}
	}
	p := startAgent(t, node, args...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "node Ready", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	})

	measure := func() leakFootprint {
		t.Helper()
		f := leakFootprint{
			fds:      countEntries(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)),
			cgroups:  countDirsBelow(c.CgroupDirs()),
			mounts:   len(c.Mounts()) + mountsBelow(rootDir),
			netns:    countEntries("/run/netns"),
			logFiles: countFiles(c.PodLogRoot),
			podDirs:  countEntries(filepath.Join(rootDir, "pods")),
		}
		m := p.get(t, "/metrics")
		f.goroutines = int(metricValue(m, "go_goroutines"))
		f.heapInUse = int(metricValue(m, "go_memstats_heap_inuse_bytes"))
		if f.goroutines < 0 || f.heapInUse < 0 {
			t.Fatalf("the agent's /metrics lacks go_goroutines or go_memstats_heap_inuse_bytes")
		}
		return f
	}

	// One round first, so that what the first pod starts once (the
	// runtime's event stream, pooled connections, caches) is in the
	// baseline.
	zero := int64(0)
	runRound := func(round int) {
		t.Helper()
		names := createPods(ctx, t, admin, c, node, fmt.Sprintf("leak%s-%d", suffix, round), batch)
		testenv.Eventually(t, time.Minute, 100*time.Millisecond, fmt.Sprintf("round %d: %d pods Running", round, batch), func() bool {
			pods, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err != nil {
				return false
			}
			running := 0
			for i := range pods.Items {
				if pods.Items[i].Status.Phase == corev1.PodRunning {
					running++
				}
			}
			return running == batch
		})
		var wg sync.WaitGroup
		for _, n := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = admin.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}()
		}
		wg.Wait()
		testenv.Eventually(t, time.Minute, 100*time.Millisecond, fmt.Sprintf("round %d: runtime empty and pods gone", round), func() bool {
			if !runtimeEmpty(rt) {
				return false
			}
			for _, n := range names {
				if _, err := admin.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false
				}
			}
			return true
		})
	}
	runRound(0)
	// Settled: the pods' directories and mounts are gone and the machine's
	// part reads the same twice, a second apart.
	var base, prev leakFootprint
	testenv.Eventually(t, 30*time.Second, time.Second, "machine settled after the first round", func() bool {
		prev, base = base, measure()
		t.Logf("after the first round: %v", base)
		return base.podDirs == 0 && base.mounts == 0 && base.machine() == prev.machine()
	})
	t.Logf("baseline after one round of %d pods: %v", batch, base)

	start := time.Now()
	// A long soak prints the footprint ten times on the way, so that a
	// heap that levels off (bounded caches) can be told from one that
	// keeps growing (a leak).
	for r := 1; r <= rounds; r++ {
		runRound(r)
		if rounds >= 50 && r%(rounds/10) == 0 && r < rounds {
			fmt.Printf("LEAKS %s after %d cycles: %v\n", t.Name(), r*batch, measure())
		}
	}
	t.Logf("%d create/delete cycles, %d at a time, in %v", rounds*batch, batch, time.Since(start).Round(time.Millisecond))

	var end leakFootprint
	settled := func() bool {
		end = measure()
		return end.machine() == base.machine() && end.goroutines <= base.goroutines+2 && end.fds <= base.fds+2
	}
	deadline := time.Now().Add(30 * time.Second)
	for !settled() && time.Now().Before(deadline) {
		waitFor(ctx, 200*time.Millisecond)
	}
	t.Logf("after the cycles: %v", end)
	if end.machine() != base.machine() {
		t.Errorf("the machine's cgroups, mounts, netns, log files, pod dirs went from %v to %v", base.machine(), end.machine())
	}
	if end.goroutines > base.goroutines+2 {
		t.Errorf("agent goroutines went from %d to %d", base.goroutines, end.goroutines)
	}
	if end.fds > base.fds+2 {
		t.Errorf("agent open fds went from %d to %d", base.fds, end.fds)
	}
	// The heap is sampled between collections: a bound, not an equality.
	// It allows for the event recorder's correlation caches (client-go's
	// record package keeps three LRU caches of 4,096 entries, filled by
	// every pod's events): fed 3,000 pods' events alone they grew the heap
	// by 5 MiB and stopped growing after about 1,500 pods. A leak of 10 KiB
	// per pod passes only over short runs; the soak is what catches one.
	if limit := base.heapInUse*3/2 + 12<<20; end.heapInUse > limit {
		t.Errorf("agent heap in use went from %.1f MiB to %.1f MiB (bound %.1f MiB)",
			float64(base.heapInUse)/(1<<20), float64(end.heapInUse)/(1<<20), float64(limit)/(1<<20))
	}
	fmt.Printf("LEAKS %s baseline: %v\nLEAKS %s after %d cycles (end): %v\n", t.Name(), base, t.Name(), rounds*batch, end)
	p.stop(t)
}

// countEntries counts the entries of dir; a missing dir has none.
func countEntries(dir string) int {
	es, _ := os.ReadDir(dir)
	return len(es)
}

// countFiles counts the regular files and symlinks below dir.
func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// countDirsBelow counts the directories below each of roots (not the roots).
func countDirsBelow(roots []string) int {
	n := 0
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && p != root {
				n++
			}
			return nil
		})
	}
	return n
}

// mountsBelow counts the mount points below dir in the mount table.
func mountsBelow(dir string) int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			n++
		}
	}
	return n
}
