//go:build linux

package nodestatus_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

func TestLinuxHostReadsThisMachine(t *testing.T) {
	h, err := nodestatus.NewLinuxHost(nodestatus.LinuxHostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := h.Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("facts: %+v", *f)
	for _, fact := range []nodestatus.Fact{nodestatus.FactCPU, nodestatus.FactMemory, nodestatus.FactNodeFS,
		nodestatus.FactImageFS, nodestatus.FactPIDs, nodestatus.FactKernelVersion, nodestatus.FactBootID, nodestatus.FactHostname} {
		if err := f.Err(fact); err != nil {
			t.Errorf("%v", err)
		}
	}
	if f.CPUs < 1 || f.MemoryTotal == 0 || f.MemoryAvailable > f.MemoryTotal || f.NodeFS.Capacity == 0 ||
		f.PIDMax == 0 || f.PIDsInUse == 0 || f.KernelVersion == "" || len(f.BootID) != 36 {
		t.Errorf("implausible facts %+v", *f)
	}
}

func TestLinuxHostParsesFiles(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, map[string]string{
		"proc/meminfo": "MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:    8192000 kB\nSwapTotal:       2048000 kB\n",
		"proc/stat": "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 1 2 3 4 5 6 7 8 9 10\ncpu2 1 2 3 4 5 6 7 8 9 10\n" +
			"intr 0\nctxt 0\nbtime 1700000000\nprocesses 10\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n",
		"proc/sys/kernel/pid_max":                                  "4194304\n",
		"proc/sys/kernel/threads-max":                              "126000\n",
		"proc/loadavg":                                             "0.10 0.20 0.30 2/517 12345\n",
		"proc/sys/kernel/random/boot_id":                           "b0071d00-0000-4000-8000-000000000001\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":    "16\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "0\n",
		"sys/class/dmi/id/product_uuid":                            "4C4C4544-0000-1000-8000-000000000000\n",
		"etc/os-release":                                           "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\n",
		"etc/machine-id":                                           "0123456789abcdef0123456789abcdef\n",
		"var/lib/kubelet/.keep":                                    "",
	})
	h, err := nodestatus.NewLinuxHost(nodestatus.LinuxHostOptions{
		ProcPath: root + "/proc", SysPath: root + "/sys", MachineIDPath: root + "/etc/machine-id",
		OSReleasePath: root + "/etc/os-release", NodeFSPath: root + "/var/lib/kubelet", ImageFSPath: root + "/var/lib/kubelet",
		DisableAddressDetection: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := h.Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Missing) != 0 {
		t.Fatalf("missing %v", f.Missing)
	}
	if f.CPUs != 3 || f.MemoryTotal != 16384000*1024 || f.MemoryAvailable != 8192000*1024 || f.SwapTotal != 2048000*1024 ||
		f.PIDMax != 126000 || f.PIDsInUse != 517 || f.BootID != "b0071d00-0000-4000-8000-000000000001" ||
		f.SystemUUID != "4C4C4544-0000-1000-8000-000000000000" || f.OSImage != "Debian GNU/Linux 13 (trixie)" ||
		f.MachineID != "0123456789abcdef0123456789abcdef" || f.NodeFS.Path != root+"/var/lib/kubelet" || f.NodeFS.Capacity == 0 ||
		f.ImageFS != f.NodeFS || len(f.IPs) != 0 {
		t.Fatalf("facts %+v", *f)
	}
	slices.SortFunc(f.HugePages, func(a, b nodestatus.HugePages) int { return int(a.PageSize>>20) - int(b.PageSize>>20) })
	if !slices.Equal(f.HugePages, []nodestatus.HugePages{{PageSize: 2 << 20, Pages: 16}, {PageSize: 1 << 30, Pages: 0}}) {
		t.Fatalf("huge pages %+v", f.HugePages)
	}
}

func TestLinuxHostMissingFacts(t *testing.T) {
	root := t.TempDir()
	h, err := nodestatus.NewLinuxHost(nodestatus.LinuxHostOptions{
		ProcPath: root + "/proc", SysPath: root + "/sys", MachineIDPath: root + "/machine-id",
		OSReleasePath: root + "/os-release", NodeFSPath: root + "/nodefs", ImageFSPath: root + "/imagefs",
		DisableAddressDetection: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := h.Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, m := range f.Missing {
		missing = append(missing, string(m.Fact))
		if !strings.HasPrefix(m.Error(), "host fact "+string(m.Fact)+": ") || errors.Unwrap(m) == nil {
			t.Errorf("fact error %q", m.Error())
		}
	}
	slices.Sort(missing)
	if want := []string{"bootID", "cpu", "imagefs", "machineID", "memory", "nodefs", "osImage", "pids"}; !slices.Equal(missing, want) {
		t.Fatalf("missing %v, want %v", missing, want)
	}
	if f.SystemUUID != "" || f.HugePages != nil {
		t.Fatalf("system UUID %q huge pages %v", f.SystemUUID, f.HugePages)
	}

	// The defaults run on such a host without panicking, name the facts, and
	// report the node not ready.
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{
		Host: h, Runtime: nodestatustest.NewRuntime(), Clock: clocktesting.NewFakePassiveClock(t0),
		NodeIPs: nil, Hostname: "n1",
	})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	err = setters.SetStatus(context.Background(), node)
	for _, want := range []string{"setter MachineInfo: host fact cpu", "setter VersionInfo: host fact osImage", "setter MemoryPressure: host fact memory",
		"setter DiskPressure: host fact imagefs", "setter NodeAddress: can't get ip address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	r := cond(t, node, corev1.NodeReady)
	if r.Status != corev1.ConditionFalse || r.Message != "missing node capacity for resources: cpu, memory, ephemeral-storage" {
		t.Fatalf("ready %+v", r)
	}
}

func TestLinuxHostOptions(t *testing.T) {
	if _, err := nodestatus.NewLinuxHost(nodestatus.LinuxHostOptions{NodeFSPath: "relative"}); err == nil || !strings.Contains(err.Error(), "NodeFSPath") {
		t.Fatalf("error %v", err)
	}
}
