package cri

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/mountinfo"
	"github.com/nodekit/nodekit/internal/testenv"
)

// needMounts skips (or fails under NODEKIT_REQUIRE_ALL=1) a test that
// bind-mounts when not run as root.
func needMounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to bind-mount subPaths)", "test", fmt.Errorf("euid %d", os.Geteuid()))
	}
}

// mountsBelow lists the mount points below dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if strings.HasPrefix(m.Mountpoint, dir+"/") {
			out = append(out, m.Mountpoint)
		}
	}
	return out
}

// subPath stays inside its volume: absolute paths, ".." and symlinks that
// lead out (or nowhere) are refused with messages naming the subPath; a
// symlink inside the volume is followed; a missing subPath is made with
// the volume's mode, and nothing outside.
func TestSubPath(t *testing.T) {
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for name, target := range map[string]string{"escape": outside, "inside": "data", "up": "..", "dangling": "nowhere", "abs": "/etc"} {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(vol, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for sub, want := range map[string]string{
		"/etc":        "error SubPath `/etc` must not be an absolute path",
		"../x":        "unable to provision SubPath `../x`: must not contain '..'",
		"a/../../x":   "unable to provision SubPath `a/../../x`: must not contain '..'",
		"escape":      "subPath `escape` resolves outside its volume",
		"escape/sub":  "subPath `escape/sub` resolves outside its volume",
		"up/x":        "subPath `up/x` resolves outside its volume",
		"abs":         "subPath `abs` resolves outside its volume",
		"dangling/x":  "subPath `dangling/x` resolves outside its volume",
		"data/../../": "unable to provision SubPath `data/../../`: must not contain '..'",
	} {
		p, err := subPath(vol, sub)
		if err == nil || err.Error() != want {
			t.Errorf("subPath %q: %q, %v; want error %q", sub, p, err, want)
		}
	}
	if p, err := subPath(vol, "inside"); err != nil || p != filepath.Join(vol, "data") {
		t.Errorf("symlink inside the volume: %q, %v", p, err)
	}
	p, err := subPath(vol, "new/dir")
	if err != nil || p != filepath.Join(vol, "new", "dir") {
		t.Fatalf("missing subPath: %q, %v", p, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("made subPath mode %v, %v; want the volume's 0777", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("something was made outside the volume: %v", err)
	}
}

// openBeneath refuses a path with a symlink in it: one a container put in
// after the subPath was resolved.
func TestOpenBeneathRefusesSymlinks(t *testing.T) {
	vol := t.TempDir()
	if err := os.MkdirAll(filepath.Join(vol, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := openBeneath(vol, filepath.Join(vol, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	closeFD(fd)
	// a is swapped for a symlink to the host.
	if err := os.Rename(filepath.Join(vol, "a"), filepath.Join(vol, "real")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(vol, "a")); err != nil {
		t.Fatal(err)
	}
	if fd, err := openBeneath(vol, filepath.Join(vol, "a", "b")); err == nil {
		closeFD(fd)
		t.Fatal("opened a path through a symlink")
	}
	if fd, err := openBeneath(vol, "/etc"); err == nil {
		closeFD(fd)
		t.Fatal("opened a path outside the volume")
	}
}

func TestExpandSubPathExpr(t *testing.T) {
	vars := map[string]string{"POD": "web-0", "NS": "prod", "EMPTY": ""}
	for expr, want := range map[string]string{
		"$(POD)":            "web-0",
		"logs/$(NS)/$(POD)": "logs/prod/web-0",
		"$$(POD)":           "$(POD)",
		"plain":             "plain",
	} {
		if got, err := expandSubPathExpr(expr, vars); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", expr, got, err, want)
		}
	}
	for expr, want := range map[string]string{
		"$(NOPE)":                 "missing value for NOPE",
		"$(EMPTY)/$(B)/$(A)/$(B)": "missing value for A, B, EMPTY",
	} {
		if got, err := expandSubPathExpr(expr, vars); err == nil || err.Error() != want {
			t.Errorf("%q: %q, %v; want error %q", expr, got, err, want)
		}
	}
}

// The container config bind-mounts each subPath (and subPathExpr, from the
// container's env) at volume-subpaths/<volume>/<container>/<index> below the
// pod's directory; a restarted container reuses the mount; a bad subPath
// is a CreateContainerConfigError whose message names it; removing the pod
// directory unmounts them all, leaving the hostPath volume's files alone.
func TestContainerConfigSubPathMounts(t *testing.T) {
	needMounts(t)
	root := t.TempDir()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "config.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &builder{podRoot: root}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.HostNetwork = true
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}},
	}
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", Value: "web-0"}}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "scratch", MountPath: "/data", SubPath: "shared/data"},
		{Name: "host", MountPath: "/etc/app.txt", SubPath: "config.txt", ReadOnly: true},
		{Name: "scratch", MountPath: "/logs", SubPathExpr: "logs/$(POD_NAME)"},
	}
	t.Cleanup(func() {
		if err := b.removePodDir(t.Context(), pod); err != nil {
			t.Error(err)
		}
	})
	podDir := b.podDir(pod)
	cfg, err := b.containerConfig(pod, c, 0, podIPs{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/data":        filepath.Join(podDir, "volume-subpaths", "scratch", "app", "0"),
		"/etc/app.txt": filepath.Join(podDir, "volume-subpaths", "host", "app", "1"),
		"/logs":        filepath.Join(podDir, "volume-subpaths", "scratch", "app", "2"),
	}
	for _, m := range cfg.Mounts {
		if w, ok := want[m.ContainerPath]; ok {
			if m.HostPath != w {
				t.Errorf("%s mounted from %s, want %s", m.ContainerPath, m.HostPath, w)
			}
			delete(want, m.ContainerPath)
		}
	}
	if len(want) > 0 {
		t.Fatalf("missing mounts %v in %v", want, cfg.Mounts)
	}
	// The bind mounts show the volume's content and write through to it.
	if got, err := os.ReadFile(filepath.Join(podDir, "volume-subpaths", "host", "app", "1")); err != nil || string(got) != "from the host" {
		t.Errorf("file subPath reads %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(podDir, "volume-subpaths", "scratch", "app", "2", "x.log"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyDir := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "scratch")
	if got, err := os.ReadFile(filepath.Join(emptyDir, "logs", "web-0", "x.log")); err != nil || string(got) != "hi" {
		t.Errorf("write through the subPathExpr mount: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(emptyDir, "shared", "data")); err != nil {
		t.Errorf("missing subPath not made: %v", err)
	}
	if n := len(mountsBelow(t, podDir)); n != 3 {
		t.Fatalf("%d mounts below the pod directory, want 3", n)
	}
	// A restart reuses the mounts.
	if _, err := b.containerConfig(pod, c, 1, podIPs{}); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsBelow(t, podDir)); n != 3 {
		t.Fatalf("%d mounts below the pod directory after a restart, want 3", n)
	}
	// The file is replaced (a new inode, as an update writes it): the next
	// restart mounts the new one in place of the old.
	if err := os.WriteFile(filepath.Join(host, "config.new"), []byte("updated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(host, "config.new"), filepath.Join(host, "config.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.containerConfig(pod, c, 2, podIPs{}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(podDir, "volume-subpaths", "host", "app", "1")); err != nil || string(got) != "updated" {
		t.Errorf("file subPath after the file was replaced reads %q, %v", got, err)
	}
	if n := len(mountsBelow(t, podDir)); n != 3 {
		t.Fatalf("%d mounts below the pod directory after the remount, want 3", n)
	}
	// A symlink the container made that leads out of the volume.
	if err := os.Symlink(host, filepath.Join(emptyDir, "out")); err != nil {
		t.Fatal(err)
	}
	for sub, msg := range map[string]string{
		"out":     "failed to prepare subPath for volumeMount \"scratch\" of container \"app\": subPath `out` resolves outside its volume",
		"/abs":    "error SubPath `/abs` must not be an absolute path",
		"a/../..": "unable to provision SubPath `a/../..`: must not contain '..'",
	} {
		bad := c.DeepCopy()
		bad.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/x", SubPath: sub}}
		_, err := b.containerConfig(pod, bad, 0, podIPs{})
		if !errors.Is(err, ErrConfig) || err.Error() != msg {
			t.Errorf("subPath %q: %v; want ErrConfig %q", sub, err, msg)
		}
	}
	bad := c.DeepCopy()
	bad.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/x", SubPathExpr: "$(UNSET)"}}
	if _, err := b.containerConfig(pod, bad, 0, podIPs{}); !errors.Is(err, ErrConfig) || err.Error() != "missing value for UNSET" {
		t.Errorf("subPathExpr with an unset variable: %v", err)
	}

	if err := b.removePodDir(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if left := mountsBelow(t, root); len(left) > 0 {
		t.Errorf("mounts left: %v", left)
	}
	if _, err := os.Stat(podDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod directory left: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(host, "config.txt")); err != nil || string(got) != "updated" {
		t.Errorf("hostPath file after the pod went: %q, %v", got, err)
	}
}

func closeFD(fd int) { _ = os.NewFile(uintptr(fd), "").Close() }
