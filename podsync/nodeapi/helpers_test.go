package nodeapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hostFiles are a fake host's /proc and cgroup v1 root.
var hostFiles = map[string]string{
	"proc/stat":                           "cpu  1000 0 300 50000 0 0 0 0 0 0\nbtime 1700000000\n",
	"proc/meminfo":                        "MemTotal: 8388608 kB\nMemFree: 1048576 kB\nInactive(file): 524288 kB\nAnonPages: 1048576 kB\n",
	"proc/vmstat":                         "pgfault 1\npgmajfault 0\n",
	"proc/loadavg":                        "0.1 0.1 0.1 1/200 99\n",
	"proc/sys/kernel/pid_max":             "32768\n",
	"proc/net/dev":                        "h\nh\n  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
	"sys/fs/cgroup/cpuacct/cpuacct.usage": "12000000000\n",
	"sys/fs/cgroup/memory/memory.usage_in_bytes": "2147483648\n",
	"sys/fs/cgroup/memory/memory.stat":           "total_inactive_file 1073741824\n",
}

// fixture is a collector on a fake host and the fake runtime with pods of
// running containers, sampled once.
type fixture struct {
	clk  *clocktesting.FakeClock
	rt   *runtimetest.Runtime
	coll *usage.Collector
	root string
}

func newFixture(t testing.TB, pods, containersPerPod int) *fixture {
	t.Helper()
	counts := make([]int, pods)
	for i := range counts {
		counts[i] = containersPerPod
	}
	return newFixtureCounts(t, counts)
}

// benchCounts are 30 pods with 100 containers: 10 pods of 4, 20 of 3.
func benchCounts() []int {
	counts := make([]int, 30)
	for i := range counts {
		counts[i] = 3
		if i < 10 {
			counts[i] = 4
		}
	}
	return counts
}

// newFixtureCounts is newFixture with counts[p] containers in pod p.
func newFixtureCounts(t testing.TB, counts []int) *fixture {
	t.Helper()
	pods := len(counts)
	root := t.TempDir()
	testenv.WriteTree(t, root, hostFiles)
	clk := clocktesting.NewFakeClock(t0)
	rt := runtimetest.New(runtimetest.Options{Clock: clk, NoCallLog: true})
	ctx := context.Background()
	for p := range pods {
		md := &runtimeapi.PodSandboxMetadata{Name: "pod-" + itoa(p), Namespace: "ns", Uid: "uid-" + itoa(p)}
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: md}
		sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
		if err != nil {
			t.Fatal(err)
		}
		for c := range counts[p] {
			id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "c" + itoa(c)},
				Image:    &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}, sbCfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.StartContainer(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := rt.SetContainerUsage(id, runtimetest.Usage{CPUCoreNanoSeconds: uint64(p*1000+c+1) * 1e6, MemoryWorkingSetBytes: uint64(c+1) << 20, MemoryUsageBytes: uint64(c+2) << 20}); err != nil {
				t.Fatal(err)
			}
		}
	}
	coll, err := usage.New(usage.Options{NodeName: "node-1", Runtime: rt, Clock: clk, HostRoot: root, RootDir: root,
		PodLogRoot: filepath.Join(root, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	if err := coll.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	return &fixture{clk: clk, rt: rt, coll: coll, root: root}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func newHandler(t testing.TB, opts nodeapi.Options) *nodeapi.Handler {
	t.Helper()
	h, err := nodeapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(h http.Handler, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}
