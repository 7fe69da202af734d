package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// File is one file of a volume's payload: its content and permission bits.
type File struct {
	Data []byte
	Mode fs.FileMode
	// Owner, when set, is the user that owns the file (the pod's common
	// runAsUser, for its service-account tokens); nil: the writer's.
	Owner *int64
}

// Names of the atomic writer's own entries in a volume directory.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// Limits on payload paths, as the kubelet's atomic writer checks them.
const (
	maxPathLength    = 4096
	maxElementLength = 255
)

// ErrInvalidPath is wrapped by errors for a payload path the writer refuses:
// absolute, with a ".." element, starting with "..", empty, or too long.
var ErrInvalidPath = errors.New("invalid payload path")

// checkPath applies the kubelet's rules for a path in a volume's payload.
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty", ErrInvalidPath)
	case len(p) > maxPathLength:
		return fmt.Errorf("%w: %q is longer than %d characters", ErrInvalidPath, p, maxPathLength)
	case filepath.IsAbs(p):
		return fmt.Errorf("%w: %q is absolute", ErrInvalidPath, p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("%w: %q starts with '..'", ErrInvalidPath, p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidPath, p)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return fmt.Errorf("%w: %q contains '..'", ErrInvalidPath, p)
		}
		if len(e) > maxElementLength {
			return fmt.Errorf("%w: %q has an element longer than %d characters", ErrInvalidPath, p, maxElementLength)
		}
	}
	return nil
}

// writeAtomic makes dir hold exactly payload, the way the kubelet's atomic
// writer does, so a reader never sees part of an update: the files go to a
// new hidden directory "..<timestamp>.<random>", the symlink "..data" is
// swapped to it with one rename, and each top-level name of the payload is
// a symlink "<name> -> ..data/<name>" that is created once and survives
// updates. Then the previous directory and top-level names no longer in the
// payload are removed. A payload equal to what dir holds writes nothing.
// It reports whether it wrote. Nothing is written outside dir, and no
// symlink in dir is followed except the writer's own.
func writeAtomic(clk clock.PassiveClock, dir string, payload map[string]File) (bool, error) {
	return writeAtomicGroup(clk, dir, payload, -1)
}

// writeAtomicGroup is writeAtomic that, with gid >= 0 (the pod's fsGroup),
// also gives dir and everything the writer makes below it that group, and
// the directories the set-group-ID bit and group read and search, as the
// kubelet sets a volume's ownership; the caller adds group read to the
// files' modes. A payload whose files have another group is rewritten.
func writeAtomicGroup(clk clock.PassiveClock, dir string, payload map[string]File, gid int64) (bool, error) {
	clean := make(map[string]File, len(payload))
	for p, f := range payload {
		if err := checkPath(p); err != nil {
			return false, err
		}
		clean[filepath.Clean(p)] = f
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	oldTS, err := os.Readlink(filepath.Join(dir, dataDirName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		oldTS = ""
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", dataDirName, err)
	case strings.ContainsRune(oldTS, '/') || !strings.HasPrefix(oldTS, ".."):
		return false, fmt.Errorf("%s in %s points to %q, not to a directory of its own", dataDirName, dir, oldTS)
	}
	oldNames := map[string]bool{}
	if oldTS != "" {
		same, names, err := sameContent(filepath.Join(dir, oldTS), clean, gid)
		if err != nil {
			return false, err
		}
		oldNames = names
		if same && visibleOK(dir, clean) {
			return false, nil
		}
	}
	ts, err := os.MkdirTemp(dir, clk.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := os.Chmod(ts, 0o755); err != nil {
		_ = os.RemoveAll(ts)
		return false, err
	}
	if err := writeFiles(ts, clean); err != nil {
		_ = os.RemoveAll(ts)
		return false, err
	}
	if gid >= 0 {
		if err := setGroup(dir, ts, int(gid)); err != nil {
			_ = os.RemoveAll(ts)
			return false, err
		}
	}
	tmp := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		_ = os.RemoveAll(ts)
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDirName)); err != nil {
		_ = os.Remove(tmp)
		_ = os.RemoveAll(ts)
		return false, err
	}
	newNames := topLevel(clean)
	for name := range newNames {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil {
			return true, err
		}
	}
	if oldTS != "" {
		if err := os.RemoveAll(filepath.Join(dir, oldTS)); err != nil {
			return true, err
		}
	}
	for name := range oldNames {
		if !newNames[name] {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return true, err
			}
		}
	}
	return true, nil
}

// setGroup gives dir and everything below ts the group gid; directories
// also get group read and search and the set-group-ID bit.
func setGroup(dir, ts string, gid int) error {
	own := func(p string, isDir bool) error {
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		if !isDir {
			return nil
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		return os.Chmod(p, st.Mode().Perm()|0o550|os.ModeSetgid)
	}
	if err := own(dir, true); err != nil {
		return err
	}
	return filepath.WalkDir(ts, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return own(p, d.IsDir())
	})
}

func topLevel(payload map[string]File) map[string]bool {
	names := make(map[string]bool, len(payload))
	for p := range payload {
		names[strings.SplitN(p, "/", 2)[0]] = true
	}
	return names
}

// visibleOK reports whether every top-level name of payload is the
// writer's symlink into ..data.
func visibleOK(dir string, payload map[string]File) bool {
	for name := range topLevel(payload) {
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || target != filepath.Join(dataDirName, name) {
			return false
		}
	}
	return true
}

// sameContent compares the files under ts with payload and returns the
// top-level names ts holds.
func sameContent(ts string, payload map[string]File, gid int64) (bool, map[string]bool, error) {
	names := map[string]bool{}
	seen := 0
	same := true
	err := filepath.WalkDir(ts, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == ts {
			return nil
		}
		rel, _ := filepath.Rel(ts, p)
		names[strings.SplitN(rel, "/", 2)[0]] = true
		if d.IsDir() || !same {
			return nil
		}
		f, ok := payload[rel]
		if !ok || !d.Type().IsRegular() {
			same = false
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != f.Mode.Perm() || info.Size() != int64(len(f.Data)) {
			same = false
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && (gid >= 0 && int64(st.Gid) != gid || f.Owner != nil && int64(st.Uid) != *f.Owner) {
			same = false
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, f.Data) {
			same = false
		}
		seen++
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, names, nil
	}
	if err != nil {
		return false, nil, err
	}
	return same && seen == len(payload), names, nil
}

// writeFiles writes payload below ts, a directory the writer just made:
// no entry below it exists yet, so files are created exclusively and no
// symlink is followed.
func writeFiles(ts string, payload map[string]File) error {
	paths := make([]string, 0, len(payload))
	for p := range payload {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		f := payload[p]
		full := filepath.Join(ts, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		fd, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		_, werr := fd.Write(f.Data)
		cerr := fd.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return err
		}
		if err := os.Chmod(full, f.Mode.Perm()); err != nil {
			return err
		}
		if f.Owner != nil {
			if err := os.Lchown(full, int(*f.Owner), -1); err != nil {
				return err
			}
		}
	}
	return nil
}
