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
// in: 0 not known yet.
type cgroupVersion uint8

const (
	cgroupV1 cgroupVersion = 1
	cgroupV2 cgroupVersion = 2
)

// cgroupLoc is where a cgroup's figures were found, so that later reads
// of it open only the files that hold them: the version, and which of its
// directories (on cgroup v1, one per mounted hierarchy) holds the CPU,
// the memory and the process figures, as an index plus one (0: not known
// yet; inNone: in none of them).
type cgroupLoc struct {
	ver            cgroupVersion
	cpu, mem, pids int
}

const inNone = -1

// noUsage marks a figure not found in its file.
const noUsage = ^uint64(0)

// look reports whether directory i is to be read for a figure found at
// where.
func look(where, i int) bool { return where == 0 || where == i+1 }

// cgroup reads a cgroup's CPU and memory use from its directories, one per
// mounted hierarchy on cgroup v1 (cpuacct and memory may be different
// mounts) or the one of cgroup v2: cpuacct.usage or cpu.stat's usage_usec;
// memory.usage_in_bytes with memory.stat's total_* fields, or
// memory.current with memory.stat; pids.current. Directories without these
// files are passed over. loc, when it says where the figures are, has
// only those files read; when it does not, it is set to where they were
// found, once the cgroup had CPU or memory figures.
func (h *host) cgroup(dirs []string, loc *cgroupLoc) (cgroupUsage, error) {
	// The files of the memory figures, cgroup v1's then v2's; memory.stat's
	// keys are the prefix and inactive_file, pgfault and pgmajfault, and rss.
	memoryFiles := [...]struct {
		ver                       cgroupVersion
		usage, limit, prefix, rss string
	}{
		{cgroupV1, "memory.usage_in_bytes", "memory.limit_in_bytes", "total_", "total_rss"},
		{cgroupV2, "memory.current", "memory.max", "", "anon"},
	}
	try := func(v cgroupVersion) bool { return loc.ver == 0 || loc.ver == v }
	cpuAt, memAt, pidsAt := inNone, inNone, inNone
	var found cgroupVersion
	var u cgroupUsage
	var errs []error
	note := func(err error) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for i, d := range dirs {
		if u.hasCPU && u.hasMemory && u.hasProcesses {
			break // the other hierarchies hold nothing more
		}
		if !u.hasCPU && look(loc.cpu, i) && try(cgroupV1) {
			v, ok, err := h.r.uint(filepath.Join(d, "cpuacct.usage"))
			note(err)
			if err == nil && ok {
				u.cpuNanos, u.hasCPU, found, cpuAt = v, true, cgroupV1, i+1
			}
		}
		if !u.hasCPU && look(loc.cpu, i) && try(cgroupV2) {
			// cgroup v1's cpu hierarchy has a cpu.stat too, without
			// usage_usec; a new cgroup v2 may have used none yet.
			usec := noUsage
			if err := h.r.keyed(filepath.Join(d, "cpu.stat"), map[string]*uint64{"usage_usec": &usec}); err == nil && usec != noUsage {
				u.cpuNanos, u.hasCPU, found, cpuAt = usec*1000, true, cgroupV2, i+1
			}
		}
		if !u.hasMemory && look(loc.mem, i) {
			for _, f := range memoryFiles {
				if !try(f.ver) {
					continue
				}
				v, ok, err := h.r.uint(filepath.Join(d, f.usage))
				if err != nil || !ok {
					note(err)
					continue
				}
				u.usage, u.hasMemory, found, memAt = v, true, f.ver, i+1
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
		if !u.hasProcesses && look(loc.pids, i) { // both versions
			if v, ok, err := h.r.uint(filepath.Join(d, "pids.current")); err == nil && ok {
				u.processes, u.hasProcesses, pidsAt = v, true, i+1
			}
		}
	}
	if loc.ver == 0 && (u.hasCPU || u.hasMemory) {
		// A figure in none of the directories is not looked for again: the
		// hierarchies of a cgroup that exists do not change.
		*loc = cgroupLoc{ver: found, cpu: cpuAt, mem: memAt, pids: pidsAt}
	}
	return u, errors.Join(errs...)
}
