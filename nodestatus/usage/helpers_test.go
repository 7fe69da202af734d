package usage_test

import (
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// procFiles are a host's /proc files: 8 GiB of memory, 1 GiB free, 512 MiB
// of inactive file pages, eth0 the default route.
var procFiles = map[string]string{
	"proc/stat": "cpu  1000 20 300 50000 40 5 6 7 0 0\ncpu0 500 10 150 25000 20 2 3 3 0 0\nbtime 1700000000\nprocesses 1234\n",
	"proc/meminfo": "MemTotal:        8388608 kB\nMemFree:         1048576 kB\nMemAvailable:    4194304 kB\n" +
		"Inactive(file):   524288 kB\nAnonPages:       2097152 kB\n",
	"proc/vmstat":                 "pgfault 5000\npgmajfault 7\n",
	"proc/sys/kernel/pid_max":     "4194304\n",
	"proc/sys/kernel/threads-max": "62000\n",
	"proc/loadavg":                "0.50 0.40 0.30 3/456 7890\n",
	"proc/net/dev": "Inter-|   Receive                                                |  Transmit\n" +
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n" +
		"    lo: 999 9 0 0 0 0 0 0 999 9 0 0 0 0 0 0\n" +
		"  eth0: 1000 10 1 0 0 0 0 0 2000 20 2 0 0 0 0 0\n" +
		"  eth1: 3000 30 0 0 0 0 0 0 4000 40 0 0 0 0 0 0\n",
	"proc/net/route": "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"eth0\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
}

// v1Files are cgroup v1's root cpuacct and memory files: 3 GiB in use,
// 1 GiB of it inactive file pages.
var v1Files = map[string]string{
	"sys/fs/cgroup/cpuacct/cpuacct.usage":        "50000000000\n",
	"sys/fs/cgroup/memory/memory.usage_in_bytes": "3221225472\n",
	"sys/fs/cgroup/memory/memory.stat": "cache 100\nrss 200\ntotal_cache 1073741824\ntotal_rss 1610612736\n" +
		"total_inactive_file 1073741824\ntotal_pgfault 900\ntotal_pgmajfault 9\n",
	"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
}

// v2Files are the unified hierarchy's root files (no memory.current at the
// root, as on a real host).
var v2Files = map[string]string{
	"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
	"sys/fs/cgroup/cpu.stat":           "usage_usec 40000000\nuser_usec 30000000\nsystem_usec 10000000\n",
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func val(p *uint64) uint64 {
	if p == nil {
		return 1<<64 - 1
	}
	return *p
}
