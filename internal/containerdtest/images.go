package containerdtest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	goruntime "runtime"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest/ociimage"
)

const (
	pausePackage = "github.com/nodekit/nodekit/internal/containerdtest/pause"
	imagePath    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// busyboxApplets are linked into /bin even if `busybox --list-full` is
// unavailable or places them elsewhere.
var busyboxApplets = []string{
	"sh", "ash", "echo", "cat", "sleep", "ls", "true", "false", "env", "wget", "nc",
	"ps", "kill", "mkdir", "rm", "cp", "mv", "touch", "grep", "sed", "awk", "head",
	"tail", "wc", "test", "[", "printf", "id", "hostname", "date", "mount", "umount",
	"pidof", "ln", "chmod", "stat", "tee", "yes", "seq", "dd", "find", "xargs",
	"sort", "uniq", "cut", "tr", "basename", "dirname", "pwd", "uname", "ping",
	"ip", "ifconfig", "netstat", "nslookup", "vi", "top", "df", "du", "free",
	"httpd", "timeout", "nohup", "usleep", "md5sum", "sha256sum", "tar", "gzip",
}

// buildImages builds the pause program and writes the pause and busybox
// images as one OCI layout tar at out.
func buildImages(ctx context.Context, bins binaries, dir, out string) error {
	pauseBin := filepath.Join(dir, "pause")
	build := exec.CommandContext(ctx, bins.goTool, "build", "-ldflags=-s -w", "-o", pauseBin, pausePackage)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = sourceDir()
	if output, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("containerdtest: building the pause program: %w\n%s", err, output)
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	busybox, err := os.ReadFile(bins.busybox)
	if err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	list, err := exec.CommandContext(ctx, bins.busybox, "--list-full").Output()
	if err != nil {
		list = nil // fall back to busyboxApplets
	}

	var buf bytes.Buffer
	err = ociimage.WriteLayout(&buf,
		ociimage.Image{
			Name:    PauseImage,
			Config:  ociimage.ImageConfig{Env: []string{imagePath}, Entrypoint: []string{"/pause"}},
			Entries: []ociimage.Entry{{Path: "pause", Data: pause, Mode: 0o755}},
		},
		ociimage.Image{
			Name:    BusyboxImage,
			Config:  ociimage.ImageConfig{Env: []string{imagePath}, Cmd: []string{"sh"}},
			Entries: busyboxEntries(busybox, string(list)),
		},
	)
	if err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	return nil
}

// sourceDir is where `go build` runs: this package's source directory when
// it is still there (so the module is found whatever the test's working
// directory), else the working directory.
func sourceDir() string {
	_, file, _, ok := goruntime.Caller(0)
	if ok {
		if st, err := os.Stat(filepath.Dir(file)); err == nil && st.IsDir() {
			return filepath.Dir(file)
		}
	}
	return ""
}

// busyboxEntries lays out a small root filesystem: /bin/busybox, a symlink
// for every applet where busybox itself places it and in /bin, the usual
// directories, and passwd/group files with root and nobody.
func busyboxEntries(busybox []byte, listFull string) []ociimage.Entry {
	entries := []ociimage.Entry{
		{Path: "bin/busybox", Data: busybox, Mode: 0o755},
		{Path: "dev", Type: tar.TypeDir},
		{Path: "proc", Type: tar.TypeDir, Mode: 0o555},
		{Path: "sys", Type: tar.TypeDir, Mode: 0o555},
		{Path: "tmp", Type: tar.TypeDir, Mode: 0o1777},
		{Path: "root", Type: tar.TypeDir, Mode: 0o700},
		{Path: "var/tmp", Type: tar.TypeDir, Mode: 0o1777},
		{Path: "etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), Mode: 0o644},
		{Path: "etc/group", Data: []byte("root:x:0:\nnogroup:x:65534:\n"), Mode: 0o644},
	}
	seen := map[string]bool{"bin/busybox": true}
	link := func(p string) {
		p = strings.TrimPrefix(path.Clean("/"+p), "/")
		if p == "" || seen[p] {
			return
		}
		seen[p] = true
		entries = append(entries, ociimage.Entry{Path: p, Type: tar.TypeSymlink, Linkname: "/bin/busybox"})
	}
	var full []string
	for _, line := range strings.Split(listFull, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			full = append(full, line)
		}
	}
	for _, p := range full {
		link(p)
	}
	for _, p := range full {
		link("bin/" + path.Base(p))
	}
	for _, name := range busyboxApplets {
		link("bin/" + name)
	}
	return entries
}

// importImages imports the layout into the k8s.io namespace, unpacked for
// the snapshotter in use, and checks that the CRI image service sees both
// images.
func (c *Containerd) importImages(ctx context.Context, bins binaries, layout string) error {
	cmd := exec.CommandContext(ctx, bins.ctr, "--address", c.Address, "--namespace", c.Namespace,
		"images", "import", "--snapshotter", c.Snapshotter, layout)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("containerdtest: ctr images import: %w\n%s", err, output)
	}
	images := c.ImageClient()
	for _, ref := range []string{c.PauseImage, c.BusyboxImage} {
		resp, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			return fmt.Errorf("containerdtest: image status of %s: %w", ref, err)
		}
		if resp.GetImage() == nil {
			return fmt.Errorf("containerdtest: the CRI image service does not see %s after the import", ref)
		}
	}
	return os.Remove(layout)
}
