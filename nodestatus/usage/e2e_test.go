package usage_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/runtime/remote"
)

// ctrd is the real containerd of the end-to-end test (the host's 1.x) and
// ctrd2 a containerd 2; nil in -short mode or where they are not
// available (the tests then skip).
var ctrd, ctrd2 *containerdtest.Containerd

func TestMain(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }

// noSandboxStats is a runtime without sandbox stats, as containerd 1.6
// can be, so that the collector reads the pod's cgroup.
type noSandboxStats struct {
	*remote.Client
	containerStats *atomic.Int32 // ListContainerStats calls
}

func (r noSandboxStats) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r.containerStats.Add(1)
	return r.Client.ListContainerStats(ctx, filter)
}

func (noSandboxStats) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, status.Error(codes.Unimplemented, "no sandbox stats")
}

// TestE2EMemoryWorkingSet runs a busybox container that holds 32 MiB on
// containerd and checks that the collected working set is within 20% of
// what its cgroup says it uses, for the container (CRI stats, or its
// cgroup when the pod's is read) and for the pod (sandbox stats, and the
// pod cgroup when the runtime has none).
func TestE2EMemoryWorkingSet(t *testing.T) { memoryWorkingSet(t, containerdtest.Need(t, ctrd), false) }

// TestE2EMemoryWorkingSetContainerd2 is TestE2EMemoryWorkingSet on
// containerd 2, which has sandbox stats: the "sandbox stats" case gets the
// pod's figures from them alone (no pod cgroup directory is given).
func TestE2EMemoryWorkingSetContainerd2(t *testing.T) {
	memoryWorkingSet(t, containerdtest.Need2(t, ctrd2), true)
}

// memoryWorkingSet runs the test on c; wantSandboxStats fails it when the
// runtime has no sandbox stats.
func memoryWorkingSet(t *testing.T, c *containerdtest.Containerd, wantSandboxStats bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := remote.New(remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	uid := "usage-e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sbCfg := c.SandboxConfig("mem", "e2e", uid)
	sb, err := client.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.RemovePodSandbox(context.Background(), sb) })
	const held = 32 << 20
	cfg := c.BusyboxContainer("hog", "sh", "-c",
		`trap 'exit 0' TERM; x=$(head -c `+strconv.Itoa(held)+` /dev/zero | tr '\000' a); echo ready; sleep 3600 & wait`)
	id, err := client.CreateContainer(ctx, sb, cfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(c.PodLogDirectory("mem", "e2e", uid), "hog", "0.log")
	wall := clock.RealClock{}
	for deadline := wall.Now().Add(time.Minute); ; {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "ready") {
			break
		}
		if wall.Now().After(deadline) {
			t.Fatal("the container did not allocate its memory within a minute")
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-wall.After(50 * time.Millisecond):
		}
	}

	// The pod's and the container's cgroup directories.
	var podDirs []string
	for _, d := range c.CgroupDirs() {
		if p := filepath.Join(d, "pod"+uid); exists(p) {
			podDirs = append(podDirs, p)
		}
	}
	cgroupUsage := func(dirs []string, sub string) uint64 {
		for _, d := range dirs {
			for _, f := range []string{"memory.usage_in_bytes", "memory.current"} {
				if b, err := os.ReadFile(filepath.Join(d, sub, f)); err == nil {
					v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
					return v
				}
			}
		}
		t.Fatalf("no memory usage file in %v/%s", dirs, sub)
		return 0
	}

	_, sbErr := client.PodSandboxStats(ctx, sb)
	if sbErr != nil && wantSandboxStats {
		t.Fatalf("PodSandboxStats on containerd %s: %v, want the sandbox's stats", c.RuntimeVersion, sbErr)
	}
	if sbErr != nil {
		t.Logf("the runtime has no sandbox stats (%v): both cases read the pod cgroup", sbErr)
	}
	for _, tc := range []struct {
		name    string
		rt      usage.Runtime
		cgroups bool
	}{{"sandbox stats", client, false}, {"pod cgroup", noSandboxStats{client, new(atomic.Int32)}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			o := usage.Options{NodeName: "e2e", Runtime: tc.rt, RootDir: t.TempDir(), PodLogRoot: c.PodLogRoot}
			if tc.cgroups || sbErr != nil { // with pod cgroups to read, sandbox stats are not asked for
				o.PodCgroupDirs = func(u string) []string {
					if u == uid {
						return podDirs
					}
					return nil
				}
			}
			coll, err := usage.New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := coll.SyncOnce(ctx); err != nil {
				t.Fatal(err)
			}
			s := coll.Latest().Summary
			if s.Node.CPU == nil || s.Node.Memory == nil || s.Node.Fs == nil {
				t.Errorf("node cpu %v memory %v fs %v: want all", s.Node.CPU, s.Node.Memory, s.Node.Fs)
			}
			var found bool
			for _, p := range s.Pods {
				if p.PodRef.UID != uid {
					continue
				}
				found = true
				if len(p.Containers) != 1 || p.Containers[0].Memory == nil || p.Memory == nil {
					t.Fatalf("pod %+v: want one container with memory, and the pod's", p)
				}
				ws := *p.Containers[0].Memory.WorkingSetBytes
				cg := cgroupUsage(podDirs, id)
				t.Logf("container working set %d MiB, its cgroup's usage %d MiB", ws>>20, cg>>20)
				if ws < held || math.Abs(float64(ws)-float64(cg)) > 0.2*float64(cg) {
					t.Errorf("container working set %d, want >= %d and within 20%% of the cgroup's %d", ws, held, cg)
				}
				pws := *p.Memory.WorkingSetBytes
				pcg := cgroupUsage(podDirs, "")
				t.Logf("pod working set %d MiB, its cgroup's usage %d MiB", pws>>20, pcg>>20)
				if math.Abs(float64(pws)-float64(pcg)) > 0.2*float64(pcg) {
					t.Errorf("pod working set %d, want within 20%% of the pod cgroup's %d", pws, pcg)
				}
				if p.CPU == nil || *p.CPU.UsageCoreNanoSeconds == 0 {
					t.Errorf("pod cpu %+v, want some", p.CPU)
				}
				if l := p.Containers[0].Logs; l == nil || *l.UsedBytes == 0 {
					t.Errorf("container logs %+v, want the bytes of its log", l)
				}
			}
			if !found {
				t.Fatalf("pod %s not in the summary", uid)
			}
			// With the container's cgroup read, a second sample within
			// VolumeInterval asks the runtime for no container stats.
			if r, ok := tc.rt.(noSandboxStats); ok {
				if err := coll.SyncOnce(ctx); err != nil {
					t.Fatal(err)
				}
				if n := r.containerStats.Load(); n != 1 {
					t.Errorf("ListContainerStats called %d times over two samples, want once (the writable layers)", n)
				}
			}
		})
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
