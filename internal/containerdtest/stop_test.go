package containerdtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
)

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool { return !zombie(pid) }

// TestStopLeavesNothing starts instances of its own, leaves a running pod in
// each, and checks that Stop removes every process, mount, cgroup and file:
// once through the CRI (graceful), once after containerd was SIGKILLed so
// that only the by-PID, by-cgroup and by-mountinfo sweeps can clean up.
func TestStopLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		major          int
		killContainerd bool
	}{
		{"graceful", 1, false},
		{"containerd killed", 1, true},
		{"containerd2 graceful", 2, false},
		{"containerd2 killed", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.major == 2 {
				Need2(t, ctrd2)
			} else {
				Need(t, ctrd)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c, err := Start(ctx, Options{Major: tc.major})
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					c.Stop()
				}
			}()
			t.Logf("started in %v", c.StartDuration)
			_, containerID, _ := runBusybox(t, ctx, c, "leftover")

			// Wait until the container's process exists, then record what the
			// instance owns.
			var pids []int
			testenv.EventuallyErr(t, 30*time.Second, 50*time.Millisecond, "the container's processes", func() (bool, error) {
				pids = c.Processes()
				return len(pids) >= 4, nil // containerd, shim, pause, sleep
			})
			mounts := c.Mounts()
			sockets := c.ShimSockets()
			if len(sockets) == 0 {
				t.Error("no shim sockets while a pod runs")
			}
			cgroups := c.CgroupDirs()
			t.Logf("container %s; processes %v; %d mounts; cgroups %v", containerID[:12], pids, len(mounts), cgroups)
			if len(mounts) == 0 {
				t.Error("no mounts under the instance's directory while a pod runs")
			}
			if len(cgroups) == 0 {
				t.Error("no cgroup directories while a pod runs")
			}
			if !strings.HasPrefix(c.CgroupParent("x"), c.CgroupRoot+"/") {
				t.Errorf("CgroupParent(x) = %q is not under %q", c.CgroupParent("x"), c.CgroupRoot)
			}

			if tc.killContainerd {
				if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				<-c.daemon().exited
			}
			begin := time.Now()
			stopped = true
			if err := c.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			t.Logf("stopped in %v", time.Since(begin))
			if err := c.Stop(); err != nil {
				t.Errorf("second Stop: %v", err)
			}

			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("process %d is still alive after Stop", pid)
				}
			}
			if got := c.Processes(); len(got) > 0 {
				t.Errorf("processes after Stop: %v", got)
			}
			info, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(info), c.Dir) {
				t.Errorf("mountinfo still names %s", c.Dir)
			}
			for _, dir := range cgroups {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("cgroup %s still exists (%v)", dir, err)
				}
			}
			for _, s := range sockets {
				if _, err := os.Stat(s); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("shim socket %s still exists (%v)", s, err)
				}
			}
			if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("directory %s still exists (%v)", c.Dir, err)
			}
		})
	}
}

func TestStartUnavailable(t *testing.T) {
	_, err := Start(context.Background(), Options{BusyboxPath: filepath.Join(t.TempDir(), "no-busybox")})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Start with a missing busybox = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"no-busybox", "make containerd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	for name, o := range map[string]Options{
		"StartTimeout": {StartTimeout: time.Millisecond},
		"StopTimeout":  {StopTimeout: time.Hour},
		"Snapshotter":  {Snapshotter: "zfs"},
		"Major":        {Major: 3},
	} {
		_, err := Start(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "Options."+name) {
			t.Errorf("%s: Start = %v, want an error naming Options.%s", name, err, name)
		}
	}
}

func TestBusyboxEntries(t *testing.T) {
	entries := busyboxEntries([]byte("bb"), "bin/sh\nusr/bin/env\nsbin/ifconfig\n")
	paths := map[string]bool{}
	for _, e := range entries {
		if paths[e.Path] {
			t.Errorf("%s appears twice", e.Path)
		}
		paths[e.Path] = true
	}
	for _, p := range []string{"bin/busybox", "bin/sh", "usr/bin/env", "bin/env", "sbin/ifconfig", "bin/ifconfig", "bin/wget", "bin/nc", "tmp", "etc/passwd"} {
		if !paths[p] {
			t.Errorf("%s missing", p)
		}
	}
}

func TestSandboxConfig(t *testing.T) {
	c := &Containerd{CgroupRoot: "/nodekit-containerd-1", PodLogRoot: "/x/pods", BusyboxImage: BusyboxImage}
	sb := c.SandboxConfig("p", "ns", "u1")
	if sb.Hostname != "" || sb.Linux.SecurityContext.NamespaceOptions.Network.String() != "NODE" {
		t.Errorf("sandbox config = %v", sb)
	}
	if sb.LogDirectory != "/x/pods/ns_p_u1" || sb.Linux.CgroupParent != "/nodekit-containerd-1/podu1" {
		t.Errorf("log directory %q, cgroup parent %q", sb.LogDirectory, sb.Linux.CgroupParent)
	}
	if sb.Labels["io.kubernetes.pod.uid"] != "u1" || sb.Labels["io.kubernetes.pod.name"] != "p" || sb.Labels["io.kubernetes.pod.namespace"] != "ns" {
		t.Errorf("labels = %v", sb.Labels)
	}
	if got := c.CgroupParent("a/b"); got != "/nodekit-containerd-1/a_b" {
		t.Errorf("CgroupParent(a/b) = %q", got)
	}
	ctr := c.BusyboxContainer("main", "sh")
	if ctr.Image.Image != BusyboxImage || ctr.LogPath != "main/0.log" {
		t.Errorf("container config = %v", ctr)
	}
}

func TestStartTime(t *testing.T) {
	if startTime(os.Getpid()) == "" {
		t.Error("startTime of this process is empty")
	}
	if startTime(os.Getpid()) != startTime(os.Getpid()) {
		t.Error("startTime is not stable")
	}
	if got := startTime(1 << 30); got != "" {
		t.Errorf("startTime of a missing process = %q", got)
	}
	if zombie(os.Getpid()) || !zombie(1<<30) {
		t.Error("zombie is wrong about this process or a missing one")
	}
}
