package cri

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/mountinfo"
)

// SubPathDir is the directory below a pod's directory where subPath mounts
// are prepared, as the kubelet's volume-subpaths:
// <pod dir>/volume-subpaths/<volume>/<container>/<mount index>.
const SubPathDir = "volume-subpaths"

// mountSubPath resolves the subPath of the container's volume mount number
// index (vm) in the volume whose host directory is volume, and returns a
// bind mount of it prepared below the pod's directory, which is what the
// runtime is given, as the kubelet prepares it:
//
//   - subPathExpr is expanded from the container's environment (vars) with
//     the $(VAR) syntax; a variable that is unset or empty is an error;
//   - the subPath must be relative and free of ".." elements;
//   - symlinks in it may lead only to places inside the volume;
//   - a missing subPath is made as directories (with the volume's mode);
//   - the resolved path is then opened element by element without
//     following symlinks, so a container cannot swap one in between the
//     check and the mount, and that open file is bind-mounted at
//     <pod dir>/volume-subpaths/<volume>/<container>/<index> (a directory or
//     an empty file, as the source is). A mount already there of the same
//     file is kept (a restarted container); another is replaced.
//
// Errors are ErrConfig (CreateContainerConfigError) with kubelet's messages,
// naming the subPath. cleanSubPaths undoes the mounts.
func (b *builder) mountSubPath(pod *corev1.Pod, c *corev1.Container, index int, vm *corev1.VolumeMount, volume string, vars map[string]string) (string, error) {
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		var err error
		if sub, err = expandSubPathExpr(vm.SubPathExpr, vars); err != nil {
			return "", configError{err}
		}
	}
	if err := checkSubPath(sub); err != nil {
		return "", configError{err}
	}
	resolved, err := subPath(volume, sub)
	if err != nil {
		return "", configError{fmt.Errorf("failed to prepare subPath for volumeMount %q of container %q: %w", vm.Name, c.Name, err)}
	}
	root, err := filepath.EvalSymlinks(volume)
	if err != nil {
		return "", err
	}
	fd, err := openBeneath(root, resolved)
	if err != nil {
		return "", configError{fmt.Errorf("failed to prepare subPath for volumeMount %q of container %q: subPath `%s`: %w", vm.Name, c.Name, sub, err)}
	}
	defer unix.Close(fd)
	target := filepath.Join(b.podDir(pod), SubPathDir, vm.Name, c.Name, strconv.Itoa(index))
	if err := bindFD(fd, target); err != nil {
		return "", fmt.Errorf("subPath `%s` of volumeMount %q of container %q: %w", sub, vm.Name, c.Name, err)
	}
	return target, nil
}

// checkSubPath refuses an absolute subPath and one with a ".." element,
// with kubelet's messages.
func checkSubPath(sub string) error {
	if filepath.IsAbs(sub) {
		return fmt.Errorf("error SubPath `%s` must not be an absolute path", sub)
	}
	if slices.Contains(strings.Split(sub, "/"), "..") {
		return fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", sub)
	}
	return nil
}

// expandSubPathExpr expands $(VAR) references in expr from vars; every
// variable referenced must be set and not empty, else the error names
// them, sorted ("missing value for A, B"), as the kubelet's does.
func expandSubPathExpr(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := expandWith(expr, func(name string) (string, bool) {
		v := vars[name]
		if v == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return v, true
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("missing value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// openBeneath opens path, which is root or below it, one element at a time
// from root without following symlinks, and returns an O_PATH descriptor
// of it. A symlink on the way is an error: path is symlink-free when
// resolved, so one there now was put there since.
func openBeneath(root, path string) (int, error) {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, errors.New("resolves outside its volume")
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening the volume: %w", err)
	}
	if rel == "." {
		return fd, nil
	}
	for _, e := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, e, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("opening %s: %w", e, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, errors.New("a symlink appeared in it")
		}
		fd = next
	}
	return fd, nil
}

// bindFD bind-mounts the file open as fd at target, making target (a
// directory or an empty file, as the source is) and its parents. A mount
// at target of the same file is kept; another is unmounted first.
func bindFD(fd int, target string) error {
	var src unix.Stat_t
	if err := unix.Fstat(fd, &src); err != nil {
		return err
	}
	mounted, err := isMounted(target)
	if err != nil {
		return err
	}
	if mounted {
		var st unix.Stat_t
		if err := unix.Stat(target, &st); err == nil && st.Dev == src.Dev && st.Ino == src.Ino {
			return nil
		}
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting the stale subPath mount %s: %w", target, err)
		}
		// What is left is the empty directory or file made for the old
		// source, which may have been of the other kind.
		if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return err
	}
	if src.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	} else {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640)
		if err != nil {
			return err
		}
		f.Close()
	}
	// The kernel follows /proc/self/fd/N to the file opened, whatever its
	// path has become since.
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting at %s: %w", target, err)
	}
	return nil
}

// isMounted reports whether path is a mount point in this process's mount
// table (a bind mount within one file system keeps its device, so the
// device alone does not tell).
func isMounted(path string) (bool, error) {
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return false, err
	}
	path = filepath.Clean(path)
	for _, m := range ms {
		if m.Mountpoint == path {
			return true, nil
		}
	}
	return false, nil
}

// cleanSubPaths unmounts every subPath mount of the pod whose directory is
// podDir and removes <podDir>/volume-subpaths; it removes nothing while a
// mount is left below it, so that no removal reaches into a volume.
func cleanSubPaths(podDir string) error {
	dir := filepath.Join(podDir, SubPathDir)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	below := func() ([]string, error) {
		ms, err := mountinfo.Read(mountinfo.Self)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, m := range ms {
			if strings.HasPrefix(m.Mountpoint, dir+"/") {
				out = append(out, m.Mountpoint)
			}
		}
		// Deepest first.
		slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
		return out, nil
	}
	mps, err := below()
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting subPath %s: %w", mp, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if left, err := below(); err != nil || len(left) > 0 {
		return errors.Join(err, fmt.Errorf("subPath mounts left below %s: %v; not removed", dir, left))
	}
	return os.RemoveAll(dir)
}
