package volume

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// isMountPoint reports whether dir is the root of a mount: its device
// differs from its parent's.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev || st.Ino == parent.Ino, nil
}

// mountTmpfs mounts a tmpfs at dir (made if missing) unless one is there
// already. size 0: no size option (half the node's memory, the kernel's
// default).
func mountTmpfs(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	mounted, err := isMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	opts := "mode=0777"
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting tmpfs at %s: %w", dir, err)
	}
	return nil
}

// mountsUnder lists the mount points below dir (dir itself excluded),
// deepest first, from /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	prefix := filepath.Clean(dir) + "/"
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeOctal(fields[4])
		if strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, sc.Err()
}

// unescapeOctal undoes mountinfo's \NNN escapes (space, tab, newline, \).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts every mount below dir, deepest first.
func unmountAll(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}
