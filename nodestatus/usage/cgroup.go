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

// cgroupVersion is which version's files a cgroup's figures were found
// in, so that later reads of it skip the other's: 0 not known yet.
type cgroupVersion uint8

const (
	cgroupV1 cgroupVersion = 1
	cgroupV2 cgroupVersion = 2
)

// cgroup reads a cgroup's CPU and memory use from its directories, one per
// mounted hierarchy on cgroup v1 (cpuacct and memory may be different
// mounts) or the one of cgroup v2: cpuacct.usage or cpu.stat's usage_usec;
// memory.usage_in_bytes with memory.stat's total_* fields, or
// memory.current with memory.stat. Directories without these files are
// passed over. ver, when known, says which version's files to read; when
// not, it is set to the version whose files had the figures.
func (h *host) cgroup(dirs []string, ver *cgroupVersion) (cgroupUsage, error) {
	// The files of the memory figures, cgroup v1's then v2's; memory.stat's
	// keys are the prefix and inactive_file, pgfault and pgmajfault, and rss.
	memoryFiles := [...]struct {
		ver                       cgroupVersion
		usage, limit, prefix, rss string
	}{
		{cgroupV1, "memory.usage_in_bytes", "memory.limit_in_bytes", "total_", "total_rss"},
		{cgroupV2, "memory.current", "memory.max", "", "anon"},
	}
	try := func(v cgroupVersion) bool { return *ver == 0 || *ver == v }
	var found cgroupVersion
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
		if !u.hasCPU && try(cgroupV1) {
			v, ok, err := h.r.uint(filepath.Join(d, "cpuacct.usage"))
			note(err)
			if err == nil && ok {
				u.cpuNanos, u.hasCPU, found = v, true, cgroupV1
			}
		}
		if !u.hasCPU && try(cgroupV2) {
			var usec uint64
			if err := h.r.keyed(filepath.Join(d, "cpu.stat"), map[string]*uint64{"usage_usec": &usec}); err == nil && usec > 0 {
				u.cpuNanos, u.hasCPU, found = usec*1000, true, cgroupV2
			}
		}
		if !u.hasMemory {
			for _, f := range memoryFiles {
				if !try(f.ver) {
					continue
				}
				v, ok, err := h.r.uint(filepath.Join(d, f.usage))
				if err != nil || !ok {
					note(err)
					continue
				}
				u.usage, u.hasMemory, found = v, true, f.ver
				note(h.r.keyed(filepath.Join(d, "memory.stat"), map[string]*uint64{
					f.prefix + "inactive_file": &u.inactiveFile,
					f.rss:                      &u.rss,
					f.prefix + "pgfault":       &u.pgfault,
					f.prefix + "pgmajfault":    &u.pgmajf,
				}))
				if l, ok, err := h.r.uint(filepath.Join(d, f.limit)); err == nil && ok && l < noLimit {
					u.limit = l
				}
				break
			}
		}
		if !u.hasProcesses { // both versions
			if v, ok, err := h.r.uint(filepath.Join(d, "pids.current")); err == nil && ok {
				u.processes, u.hasProcesses = v, true
			}
		}
	}
	if *ver == 0 {
		*ver = found
	}
	return u, errors.Join(errs...)
}
