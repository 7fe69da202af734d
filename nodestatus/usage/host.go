package usage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// host reads the node's own figures from files under a root directory:
// <root>/proc and <root>/sys.
type host struct {
	root    string
	v2      bool // the unified hierarchy is mounted at <root>/sys/fs/cgroup
	r       reader
	rootLoc cgroupLoc // where the root cgroup's figures are
}

func newHost(root string) *host {
	h := &host{root: root}
	h.v2 = exists(h.path("sys/fs/cgroup/cgroup.controllers"))
	return h
}

func (h *host) path(rel string) string { return filepath.Join(h.root, rel) }

// rootCgroupDirs are the root cgroup's directories: the unified hierarchy,
// or cgroup v1's cpuacct and memory mounts.
func (h *host) rootCgroupDirs() []string {
	if h.v2 {
		return []string{h.path("sys/fs/cgroup")}
	}
	return []string{h.path("sys/fs/cgroup/cpuacct"), h.path("sys/fs/cgroup/memory")}
}

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on every
// Linux architecture Kubernetes runs on).
const userHZ = 100

// procStat reads /proc/stat: the CPU time spent other than idle and iowait,
// in nanoseconds, and the boot time.
func (h *host) procStat() (cpuNanos uint64, boot time.Time, err error) {
	err = h.r.lines(h.path("proc/stat"), func(line string) {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "btime":
			if s, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				boot = time.Unix(s, 0)
			}
		case len(f) > 8 && f[0] == "cpu":
			// user nice system idle iowait irq softirq steal
			var ticks uint64
			for _, i := range []int{1, 2, 3, 6, 7, 8} {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				ticks += v
			}
			cpuNanos = ticks * uint64(time.Second/userHZ)
		}
	})
	return cpuNanos, boot, err
}

// nodeCPU is the node's cumulative CPU time: the root cgroup's, or
// /proc/stat's when the root cgroup does not account it.
func (h *host) nodeCPU(cg cgroupUsage) (uint64, error) {
	if cg.hasCPU {
		return cg.cpuNanos, nil
	}
	n, _, err := h.procStat()
	if err == nil && n == 0 {
		err = errors.New("usage: no cpu line in /proc/stat")
	}
	return n, err
}

// nodeMemory is the node's memory: capacity from /proc/meminfo; usage,
// inactive file pages, RSS and faults from the root cgroup on cgroup v1, or
// from /proc/meminfo and /proc/vmstat where the root cgroup has no memory
// accounting (cgroup v2).
type nodeMemory struct {
	capacity uint64
	cgroupUsage
}

func (h *host) nodeMemory(cg cgroupUsage) (nodeMemory, error) {
	var total, free, inactiveFile, anon uint64
	if err := h.r.keyed(h.path("proc/meminfo"), map[string]*uint64{
		"MemTotal": &total, "MemFree": &free, "Inactive(file)": &inactiveFile, "AnonPages": &anon,
	}); err != nil {
		return nodeMemory{}, err
	}
	if total == 0 {
		return nodeMemory{}, errors.New("usage: no MemTotal in /proc/meminfo")
	}
	m := nodeMemory{capacity: total, cgroupUsage: cg}
	if !cg.hasMemory {
		m.usage, m.inactiveFile, m.rss = total-free, inactiveFile, anon
		m.hasMemory = true
		if err := h.r.keyed(h.path("proc/vmstat"), map[string]*uint64{"pgfault": &m.pgfault, "pgmajfault": &m.pgmajf}); err != nil {
			return m, err
		}
	}
	return m, nil
}

// iface is one network interface's counters.
type iface struct {
	name                             string
	rxBytes, rxErrs, txBytes, txErrs uint64
}

// network reads /proc/net/dev (the host's network namespace) without the
// loopback interface, and names the interface of the default route in
// /proc/net/route ("eth0" when there is none).
func (h *host) network() (ifaces []iface, defaultIface string, err error) {
	ifaces, err = h.netDev(h.path("proc/net/dev"))
	if err != nil {
		return nil, "", err
	}
	defaultIface = "eth0"
	_ = h.r.lines(h.path("proc/net/route"), func(line string) {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" && defaultIface == "eth0" {
			defaultIface = f[0]
		}
	})
	return ifaces, defaultIface, nil
}

// netStats is the statsapi form of ifaces, with def as the default
// interface.
func netStats(t metav1.Time, ifaces []iface, def string) *statsapi.NetworkStats {
	ns := &statsapi.NetworkStats{Time: t}
	for _, i := range ifaces {
		is := statsapi.InterfaceStats{Name: i.name, RxBytes: u64p(i.rxBytes), RxErrors: u64p(i.rxErrs), TxBytes: u64p(i.txBytes), TxErrors: u64p(i.txErrs)}
		ns.Interfaces = append(ns.Interfaces, is)
		if i.name == def {
			ns.InterfaceStats = is
		}
	}
	return ns
}

// podNetwork reads the network counters of a pod from the network
// namespace of one of the processes in its cgroup (pf.dirs, or their child
// cgroups), as cAdvisor does for the kubelet: none when no process is
// found or the process is in the host's network namespace (PID 1's). The
// process found is kept in pf.pid until it is gone; a pod found in the
// host's namespace is not looked at again (pf.hostNetwork: a pod's
// hostNetwork cannot change, and every sandbox of it shares the host's).
func (h *host) podNetwork(pf *podFiles) ([]iface, bool) {
	if pf.hostNetwork {
		return nil, false
	}
	for attempt := 0; attempt < 2; attempt++ {
		if pf.pid == "" {
			for _, d := range pf.dirs {
				if pf.pid = cgroupPid(d, 2); pf.pid != "" {
					break
				}
			}
			if pf.pid == "" {
				return nil, false
			}
		}
		own, err := os.Stat(h.path("proc/" + pf.pid + "/ns/net"))
		if err != nil {
			pf.pid = "" // gone: find another
			continue
		}
		hostNs, err := os.Stat(h.path("proc/1/ns/net"))
		if err != nil {
			return nil, false
		}
		if os.SameFile(own, hostNs) {
			pf.hostNetwork = true
			return nil, false
		}
		ifaces, err := h.netDev(h.path("proc/" + pf.pid + "/net/dev"))
		return ifaces, err == nil
	}
	return nil, false
}

// cgroupPid returns the first process listed in dir's cgroup.procs or, to
// depth levels down, its child cgroups'.
func cgroupPid(dir string, depth int) string {
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			return f[0]
		}
	}
	if depth == 0 {
		return ""
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			if pid := cgroupPid(filepath.Join(dir, e.Name()), depth-1); pid != "" {
				return pid
			}
		}
	}
	return ""
}

// netDev reads a /proc/<pid>/net/dev file without the loopback interface.
func (h *host) netDev(path string) (ifaces []iface, err error) {
	err = h.r.lines(path, func(line string) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			return
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if name == "lo" || len(f) < 11 {
			return
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
		ifaces = append(ifaces, iface{name: name, rxBytes: n(0), rxErrs: n(2), txBytes: n(8), txErrs: n(10)})
	})
	return ifaces, err
}

// rlimit is kubelet's process limit and count: the smaller of
// kernel.pid_max and kernel.threads-max, and the number of tasks from
// /proc/loadavg.
func (h *host) rlimit() (maxPID, procs int64, err error) {
	maxPID = -1
	for _, f := range []string{"proc/sys/kernel/pid_max", "proc/sys/kernel/threads-max"} {
		v, ok, err := h.r.uint(h.path(f))
		if err != nil || !ok {
			continue
		}
		if maxPID < 0 || int64(v) < maxPID {
			maxPID = int64(v)
		}
	}
	raw, err := h.r.read(h.path("proc/loadavg"))
	if err != nil {
		return maxPID, 0, err
	}
	b := string(raw)
	f := strings.Fields(b)
	if len(f) < 4 {
		return maxPID, 0, fmt.Errorf("usage: /proc/loadavg %q: want 5 fields", b)
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return maxPID, 0, fmt.Errorf("usage: /proc/loadavg %q: want running/total", b)
	}
	procs, err = strconv.ParseInt(total, 10, 64)
	return maxPID, procs, err
}

// fsInfo is one file system's size and inodes.
type fsInfo struct {
	capacity, available, used uint64
	inodes, inodesFree        uint64
}

// statfs reads the file system that holds path.
func statfs(path string) (fsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsInfo{}, err
	}
	bs := uint64(st.Bsize)
	return fsInfo{
		capacity:   st.Blocks * bs,
		available:  st.Bavail * bs,
		used:       (st.Blocks - st.Bfree) * bs,
		inodes:     st.Files,
		inodesFree: st.Ffree,
	}, nil
}
