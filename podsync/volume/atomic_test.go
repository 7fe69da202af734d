package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// tree lists dir: each entry's relative path, "-> target" for symlinks,
// "/" for directories, "=content mode" for files; hidden timestamped
// directories show as "..TS".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, "..20") {
			rel = "..TS" + rel[strings.IndexByte(rel+"/", '/'):]
		}
		rel = strings.TrimSuffix(rel, "/")
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			if strings.HasPrefix(target, "..20") {
				target = "..TS"
			}
			out = append(out, rel+" -> "+target)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			info, _ := d.Info()
			out = append(out, fmt.Sprintf("%s=%s %o", rel, b, info.Mode().Perm()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestWriteAtomicLayout(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	dir := filepath.Join(t.TempDir(), "vol")
	wrote, err := writeAtomic(clk, dir, map[string]File{
		"a":       {Data: []byte("1"), Mode: 0o644},
		"sub/b":   {Data: []byte("2"), Mode: 0o400},
		"sub/c/d": {Data: []byte("3"), Mode: 0o755},
	})
	if err != nil || !wrote {
		t.Fatalf("first write: %v %v", wrote, err)
	}
	want := []string{"..TS/", "..TS/a=1 644", "..TS/sub/", "..TS/sub/b=2 400", "..TS/sub/c/", "..TS/sub/c/d=3 755",
		"..data -> ..TS", "a -> ..data/a", "sub -> ..data/sub"}
	if got := tree(t, dir); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("layout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "c", "d")); err != nil || string(b) != "3" {
		t.Errorf("read through the visible path: %q %v", b, err)
	}
	ts, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if !strings.HasPrefix(ts, "..2026_01_01_00_00_00.") {
		t.Errorf("timestamped directory %q not named after the clock", ts)
	}

	// The same payload writes nothing.
	wrote, err = writeAtomic(clk, dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o400}, "sub/c/d": {Data: []byte("3"), Mode: 0o755}})
	if err != nil || wrote {
		t.Errorf("same payload: wrote %v, %v", wrote, err)
	}
	if now, _ := os.Readlink(filepath.Join(dir, dataDirName)); now != ts {
		t.Errorf("..data moved from %s to %s for the same payload", ts, now)
	}

	// A changed mode, a dropped name and a new one: a new directory, the
	// old one and the dropped name gone.
	clk.Step(time.Second)
	wrote, err = writeAtomic(clk, dir, map[string]File{"a": {Data: []byte("1"), Mode: 0o600}, "e": {Data: []byte("5"), Mode: 0o644}})
	if err != nil || !wrote {
		t.Fatalf("update: %v %v", wrote, err)
	}
	want = []string{"..TS/", "..TS/a=1 600", "..TS/e=5 644", "..data -> ..TS", "a -> ..data/a", "e -> ..data/e"}
	if got := tree(t, dir); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after update:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// An empty payload leaves only ..data and an empty directory.
	if _, err := writeAtomic(clk, dir, map[string]File{}); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); strings.Join(got, ",") != "..TS/,..data -> ..TS" {
		t.Errorf("empty payload: %v", got)
	}
}

// Bad paths are refused before anything is written, and nothing is ever
// written outside the volume directory.
func TestWriteAtomicBadPaths(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	root := t.TempDir()
	dir := filepath.Join(root, "pod", "vol")
	for _, p := range []string{"../escape", "a/../../escape", "/etc/passwd", "..data", "..hidden", "", "a/" + strings.Repeat("x", 256), strings.Repeat("a/", 2049), "nul\x00"} {
		if _, err := writeAtomic(clk, dir, map[string]File{p: {Data: []byte("x"), Mode: 0o644}}); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("path %q: %v, want ErrInvalidPath", p, err)
		}
	}
	// A file and a directory of the same name cannot both be written.
	if _, err := writeAtomic(clk, dir, map[string]File{"a": {Data: []byte("x")}, "a/b": {Data: []byte("y")}}); err == nil {
		t.Error("a file that is also a directory was accepted")
	}
	// ..data pointing elsewhere (planted, not the writer's) is refused.
	planted := filepath.Join(root, "planted")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(dir, dataDirName)); err != nil {
		t.Fatal(err)
	}
	if _, err := writeAtomic(clk, dir, map[string]File{"a": {Data: []byte("x")}}); err == nil {
		t.Error("a foreign ..data target was followed")
	}
	var outside []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p != root && !strings.HasPrefix(p, filepath.Join(root, "pod")) {
			outside = append(outside, p)
		}
		return nil
	})
	if _, err := os.Stat(planted); len(outside) > 0 || err == nil {
		t.Errorf("written outside the volume: %v", outside)
	}
}

// A reader that resolves ..data once and reads every file through it sees
// one version of the whole set, never a mix; a reader of a visible path
// sees a whole file of some version, never a partial one. As with the
// kubelet's writer, an open that resolved ..data just before the swap may
// find the old directory removed (ENOENT) and is retried.
func TestWriteAtomicConcurrentReader(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	dir := t.TempDir()
	names := []string{"a", "b", "sub/c", "sub/d"}
	payload := func(v int) map[string]File {
		p := map[string]File{}
		for _, n := range names {
			p[n] = File{Data: []byte(fmt.Sprintf("version %d of %s %s", v, n, strings.Repeat("x", 4096))), Mode: 0o644}
		}
		return p
	}
	if _, err := writeAtomic(clk, dir, payload(0)); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var sets, files atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // whole sets through one resolution of ..data
		defer wg.Done()
		for !stop.Load() {
			ts, err := os.Readlink(filepath.Join(dir, dataDirName))
			if err != nil {
				errs <- err
				return
			}
			version := ""
			complete := true
			for _, n := range names {
				b, err := os.ReadFile(filepath.Join(dir, ts, n))
				if errors.Is(err, fs.ErrNotExist) {
					complete = false // the writer removed this old version: read again
					break
				}
				if err != nil {
					errs <- err
					return
				}
				v := strings.Fields(string(b))[1]
				if version == "" {
					version = v
				} else if v != version {
					errs <- fmt.Errorf("mixed set: %s and %s", version, v)
					return
				}
			}
			if complete {
				sets.Add(1)
			}
		}
	}()
	go func() { // single files through the visible paths
		defer wg.Done()
		for !stop.Load() {
			for _, n := range names {
				b, err := os.ReadFile(filepath.Join(dir, n))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("visible path %s: %w", n, err)
					return
				}
				if !strings.HasPrefix(string(b), "version ") || len(b) < 4096 {
					errs <- fmt.Errorf("partial file %s: %d bytes", n, len(b))
					return
				}
				files.Add(1)
			}
		}
	}()
	for v := 1; v <= 100; v++ {
		clk.Step(time.Second)
		if _, err := writeAtomic(clk, dir, payload(v)); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if sets.Load() == 0 || files.Load() == 0 {
		t.Errorf("readers did not read: %d sets, %d files", sets.Load(), files.Load())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 5 { // ..data, its directory, a, b, sub
		t.Errorf("left behind: %v", ents)
	}
}

// With a pod's fsGroup every file and directory the writer makes, and the
// volume directory, get the group; directories get the set-group-ID bit.
// The same payload with the same group writes nothing; another group
// rewrites it.
func TestWriteAtomicGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's group to an arbitrary one needs root")
	}
	clk := clocktesting.NewFakeClock(t0)
	dir := filepath.Join(t.TempDir(), "vol")
	payload := map[string]File{"a": {Data: []byte("1"), Mode: 0o440}, "sub/b": {Data: []byte("2"), Mode: 0o644}}
	if _, err := writeAtomicGroup(clk, dir, payload, 4321); err != nil {
		t.Fatal(err)
	}
	check := func(gid uint32) {
		t.Helper()
		n := 0
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink != 0 {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if g := info.Sys().(*syscall.Stat_t).Gid; g != gid {
				t.Errorf("%s: group %d, want %d", p, g, gid)
			}
			if d.IsDir() && info.Mode()&os.ModeSetgid == 0 {
				t.Errorf("%s: directory without the set-group-ID bit (%v)", p, info.Mode())
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != 5 { // vol, ..TS, ..TS/sub, a, sub/b
			t.Errorf("%d entries checked, want 5", n)
		}
	}
	check(4321)
	if wrote, err := writeAtomicGroup(clk, dir, payload, 4321); err != nil || wrote {
		t.Fatalf("same payload and group: wrote %v, %v", wrote, err)
	}
	clk.Step(time.Second)
	if wrote, err := writeAtomicGroup(clk, dir, payload, 4322); err != nil || !wrote {
		t.Fatalf("another group: wrote %v, %v", wrote, err)
	}
	check(4322)
}
