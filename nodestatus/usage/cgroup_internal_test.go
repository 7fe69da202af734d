package usage

import (
	"os"
	"path/filepath"
	"testing"
)

// A cgroup's figures are read, after the first read, from the directories
// they were found in and no others: files that appear elsewhere later are
// not opened (the read opens three files fewer a directory it passes over).
func TestCgroupReadWhereFound(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for _, h := range []string{"cpu", "cpuacct", "memory", "devices", "pids"} {
		d := filepath.Join(root, h, "kubepods", "podx")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	write := func(dir int, name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dirs[dir], name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(0, "cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n") // v1's, no usage_usec
	write(1, "cpuacct.usage", "100\n")
	write(2, "memory.usage_in_bytes", "4096\n")
	write(2, "memory.limit_in_bytes", "9223372036854771712\n")
	write(2, "memory.stat", "total_inactive_file 1024\ntotal_rss 2048\n")
	write(4, "pids.current", "3\n")

	h := newHost(root)
	var loc cgroupLoc
	u, err := h.cgroup(dirs, &loc)
	if err != nil {
		t.Fatal(err)
	}
	if u.cpuNanos != 100 || u.workingSet() != 3072 || u.processes != 3 {
		t.Fatalf("first read: cpu %d, working set %d, processes %d; want 100, 3072, 3", u.cpuNanos, u.workingSet(), u.processes)
	}
	if want := (cgroupLoc{ver: cgroupV1, cpu: 2, mem: 3, pids: 5}); loc != want {
		t.Fatalf("loc %+v, want %+v", loc, want)
	}

	// Figures that appear in the directories passed over are not read.
	write(0, "cpuacct.usage", "7\n")
	write(0, "memory.usage_in_bytes", "7\n")
	write(3, "pids.current", "7\n")
	write(1, "cpuacct.usage", "200\n")
	u, err = h.cgroup(dirs, &loc)
	if err != nil {
		t.Fatal(err)
	}
	if u.cpuNanos != 200 || u.usage != 4096 || u.processes != 3 {
		t.Fatalf("second read: cpu %d, memory %d, processes %d; want 200, 4096, 3 from where they were found", u.cpuNanos, u.usage, u.processes)
	}
}

// A figure in none of a cgroup's directories is not looked for again; a
// cgroup with no CPU or memory figures (gone) leaves loc unknown, to be
// searched at the next read; a cgroup v2 that has used no CPU yet has it
// found, at 0.
func TestCgroupLocUnknownAndNone(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "unified", "kubepods", "podx")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHost(root)
	var loc cgroupLoc
	if u, _ := h.cgroup([]string{d}, &loc); u.hasCPU || u.hasMemory || loc != (cgroupLoc{}) {
		t.Fatalf("empty cgroup: %+v, loc %+v; want nothing, loc unknown", u, loc)
	}
	for name, content := range map[string]string{"cpu.stat": "usage_usec 0\nuser_usec 0\n", "memory.current": "8192\n", "memory.max": "max\n", "memory.stat": "anon 4096\ninactive_file 0\n"} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := h.cgroup([]string{d}, &loc)
	if err != nil {
		t.Fatal(err)
	}
	if !u.hasCPU || u.cpuNanos != 0 || u.usage != 8192 || u.hasProcesses {
		t.Fatalf("v2 cgroup: %+v; want CPU 0 found, memory 8192, no processes", u)
	}
	if want := (cgroupLoc{ver: cgroupV2, cpu: 1, mem: 1, pids: inNone}); loc != want {
		t.Fatalf("loc %+v, want %+v", loc, want)
	}
	if err := os.WriteFile(filepath.Join(d, "pids.current"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u, _ := h.cgroup([]string{d}, &loc); u.hasProcesses {
		t.Fatalf("pids.current read after it was in none of the directories: %+v", u)
	}
}

// BenchmarkCgroupRead reads a pod cgroup laid out as cgroup v1 mounts it
// here (nine hierarchies; CPU, memory and processes in the second, fourth
// and eighth), its figures' places known from the first read.
func BenchmarkCgroupRead(b *testing.B) {
	root := b.TempDir()
	var dirs []string
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"} {
		d := filepath.Join(root, h, "kubepods", "besteffort", "pod0f2b9d7e-3c4a-4d2e-9b7a-1e2f3a4b5c6d")
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	for dir, files := range map[int]map[string]string{
		0: {"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"},
		1: {"cpuacct.usage": "123456789\n"},
		3: {"memory.usage_in_bytes": "4096000\n", "memory.limit_in_bytes": "9223372036854771712\n",
			"memory.stat": "cache 0\nrss 4096\ntotal_cache 0\ntotal_rss 409600\ntotal_inactive_file 1024\ntotal_pgfault 100\ntotal_pgmajfault 1\n"},
		7: {"pids.current": "3\n"},
	} {
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dirs[dir], name), []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	h := newHost(root)
	var loc cgroupLoc
	b.ReportAllocs()
	for b.Loop() {
		if u, err := h.cgroup(dirs, &loc); err != nil || !u.hasCPU || !u.hasMemory || !u.hasProcesses {
			b.Fatalf("%+v, %v", u, err)
		}
	}
}

// BenchmarkCgroupReadHost is BenchmarkCgroupRead on this machine's cgroup
// file system: its root cgroup, through every hierarchy mounted below
// /sys/fs/cgroup (cgroup v1), or the unified one.
func BenchmarkCgroupReadHost(b *testing.B) {
	const mnt = "/sys/fs/cgroup"
	dirs := []string{mnt}
	if !exists(filepath.Join(mnt, "cgroup.controllers")) {
		ents, err := os.ReadDir(mnt)
		if err != nil {
			b.Skip(err)
		}
		dirs = nil
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(mnt, e.Name()))
			}
		}
	}
	h := newHost("/")
	var loc cgroupLoc
	if u, err := h.cgroup(dirs, &loc); err != nil || !u.hasCPU || !u.hasMemory {
		b.Skipf("no CPU and memory figures in %v: %+v, %v", dirs, u, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.cgroup(dirs, &loc); err != nil {
			b.Fatal(err)
		}
	}
}
