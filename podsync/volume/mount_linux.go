package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodekit/nodekit/internal/mountinfo"
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
func mountTmpfs(dir string, size int64, gid int64) error {
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
	if gid >= 0 {
		// The kubelet's ownership of a writable volume with fsGroup.
		if err := os.Lchown(dir, -1, int(gid)); err != nil {
			return fmt.Errorf("tmpfs at %s: fsGroup %d: %w", dir, gid, err)
		}
		if err := os.Chmod(dir, 0o777|os.ModeSetgid); err != nil {
			return err
		}
	}
	return nil
}

// mountsUnder lists the mount points below dir (dir itself excluded),
// deepest first, from the process's mount table.
func mountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return nil, err
	}
	var out []string
	prefix := filepath.Clean(dir) + "/"
	for _, m := range ms {
		if strings.HasPrefix(m.Mountpoint, prefix) {
			out = append(out, m.Mountpoint)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
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
