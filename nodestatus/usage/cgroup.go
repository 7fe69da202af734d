package usage

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// cgroupUsage is what the cgroup files of one cgroup say.
type cgroupUsage struct {
	hasCPU, hasMemory bool
	cpuNanos          uint64 // cumulative CPU time
	usage             uint64 // memory in use, page cache included
	inactiveFile      uint64
	rss               uint64
	pgfault, pgmajf   uint64
	limit             uint64 // 0: none
	processes         uint64
	hasProcesses      bool
}

// workingSet is kubelet's working set: usage less inactive file pages, never
// below zero.
func (u cgroupUsage) workingSet() uint64 {
	if u.inactiveFile > u.usage {
		return 0
	}
	return u.usage - u.inactiveFile
}

// noLimit is the value above which cgroup v1 reports no memory limit
// (page-aligned LLONG_MAX).
const noLimit = 1 << 62

// readCgroup reads a cgroup's CPU and memory use from its directories, one
// per mounted hierarchy on cgroup v1 (cpuacct and memory may be different
// mounts) or the one of cgroup v2: cpuacct.usage or cpu.stat's usage_usec;
// memory.usage_in_bytes with memory.stat's total_* fields, or memory.current
// with memory.stat. Directories without these files are passed over.
func readCgroup(dirs []string) (cgroupUsage, error) {
	// The files of the memory figures, cgroup v1's then v2's; memory.stat's
	// keys are the prefix and inactive_file, pgfault and pgmajfault, and rss.
	memoryFiles := [...]struct{ usage, limit, prefix, rss string }{
		{"memory.usage_in_bytes", "memory.limit_in_bytes", "total_", "total_rss"},
		{"memory.current", "memory.max", "", "anon"},
	}
	var u cgroupUsage
	var errs []error
	note := func(err error) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, d := range dirs {
		if u.hasCPU && u.hasMemory && u.hasProcesses {
			break // the other hierarchies hold nothing more
		}
		if !u.hasCPU {
			if v, ok, err := readUint(filepath.Join(d, "cpuacct.usage")); err == nil && ok { // v1
				u.cpuNanos, u.hasCPU = v, true
			} else {
				note(err)
				var usec uint64 // v2
				if err := readKeyed(filepath.Join(d, "cpu.stat"), map[string]*uint64{"usage_usec": &usec}); err == nil && usec > 0 {
					u.cpuNanos, u.hasCPU = usec*1000, true
				}
			}
		}
		if !u.hasMemory {
			for _, f := range memoryFiles {
				v, ok, err := readUint(filepath.Join(d, f.usage))
				if err != nil || !ok {
					note(err)
					continue
				}
				u.usage, u.hasMemory = v, true
				note(readKeyed(filepath.Join(d, "memory.stat"), map[string]*uint64{
					f.prefix + "inactive_file": &u.inactiveFile,
					f.rss:                      &u.rss,
					f.prefix + "pgfault":       &u.pgfault,
					f.prefix + "pgmajfault":    &u.pgmajf,
				}))
				if l, ok, err := readUint(filepath.Join(d, f.limit)); err == nil && ok && l < noLimit {
					u.limit = l
				}
				break
			}
		}
		if !u.hasProcesses { // both versions
			if v, ok, err := readUint(filepath.Join(d, "pids.current")); err == nil && ok {
				u.processes, u.hasProcesses = v, true
			}
		}
	}
	return u, errors.Join(errs...)
}
