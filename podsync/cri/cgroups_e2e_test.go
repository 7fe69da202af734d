package cri

import (
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/mountinfo"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
)

// readCgroup reads file of cgroup cg from the first hierarchy with
// controller, "" if it does not exist.
func readCgroup(t *testing.T, cg, controller, file string) string {
	t.Helper()
	ms, err := cgroupMounts(mountinfo.Self)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if !m.controllers[controller] {
			continue
		}
		if d, ok := m.dir(cg); ok {
			b, err := os.ReadFile(filepath.Join(d, file))
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no cgroup hierarchy with %s", controller)
	return ""
}

func TestE2EPodCgroups(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2EPodCgroups) }

func testE2EPodCgroups(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	ms, err := cgroupMounts(mountinfo.Self)
	if err != nil {
		t.Fatal(err)
	}
	v2 := false
	for _, m := range ms {
		v2 = v2 || (m.v2 && m.controllers["memory"])
	}
	pod := e2ePod(c, "cgroups", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })

	cg := PodCgroupParent(pod, CgroupfsDriver, c.CgroupRoot)
	if want := path.Join(c.CgroupRoot, "kubepods", "burstable", "pod"+string(pod.UID)); cg != want {
		t.Fatalf("pod cgroup %s, want %s", cg, want)
	}
	burstable, besteffort := path.Dir(cg), path.Join(c.CgroupRoot, "kubepods", "besteffort")
	var checks [][3]string // cgroup, controller+file, want
	if v2 {
		checks = [][3]string{{cg, "cpu/cpu.weight", "4"}, {cg, "cpu/cpu.max", "20000 100000"}, {cg, "memory/memory.max", "67108864"},
			{burstable, "cpu/cpu.weight", "4"}, {besteffort, "cpu/cpu.weight", "1"}}
	} else {
		checks = [][3]string{{cg, "cpu/cpu.shares", "102"}, {cg, "cpu/cpu.cfs_quota_us", "20000"}, {cg, "cpu/cpu.cfs_period_us", "100000"},
			{cg, "memory/memory.limit_in_bytes", "67108864"}, {burstable, "cpu/cpu.shares", "102"}, {besteffort, "cpu/cpu.shares", "2"}}
	}
	for _, ch := range checks {
		ctl, file, _ := strings.Cut(ch[1], "/")
		if got := readCgroup(t, ch[0], ctl, file); got != ch[2] {
			t.Errorf("%s %s = %q, want %q", ch[0], file, got, ch[2])
		}
	}
	// The container's own cgroup sits below the pod's.
	if got := readCgroup(t, cg, "memory", "cgroup.procs"); got != "" {
		t.Errorf("pod cgroup %s holds processes itself: %q", cg, got)
	}

	e.remove(pod)
	testenv.Eventually(t, 10*time.Second, 20*time.Millisecond, "pod cgroup removed", func() bool {
		for _, m := range ms {
			if d, ok := m.dir(cg); ok {
				if _, err := os.Stat(d); err == nil {
					return false
				}
			}
		}
		return true
	})
	want := "2"
	if v2 {
		want = "1"
	}
	// Remove lowers the burstable cgroup's CPU after the pod's
	// directories are gone, so a moment after the wait above sees them go.
	file := map[bool]string{false: "cpu.shares", true: "cpu.weight"}[v2]
	testenv.Eventually(t, 10*time.Second, 20*time.Millisecond, "burstable CPU lowered to "+want+" after the pod left", func() bool {
		return readCgroup(t, burstable, "cpu", file) == want
	})
}

// A process left in a pod's cgroup once the runtime has removed the pod is
// killed and the cgroup removed, as the kubelet's pod container manager
// does. containerd 2 leaves one (a sandbox task's init process) when a
// RunPodSandbox is cut short between creating the task and reading its
// pid; here a process of the test's own stands for it.
func TestE2EPodCgroupLeftoverKilled(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2EPodCgroupLeftoverKilled)
}

func testE2EPodCgroupLeftoverKilled(t *testing.T, c *containerdtest.Containerd) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	e := e2eSetup(t, c)
	pod := e2ePod(c, "cgroup-leftover", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	dirs := e.cri.PodCgroupDirs(string(pod.UID))
	if len(dirs) == 0 {
		t.Fatal("the pod has no cgroup")
	}

	stray := exec.Command(sleep, "3600")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- stray.Wait() }()
	var waitErr error
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = stray.Process.Kill()
			<-exited
		}
	})
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0o644); err != nil {
			t.Fatalf("moving pid %d into %s: %v", stray.Process.Pid, d, err)
		}
	}

	e.remove(pod)
	testenv.Eventually(t, time.Minute, 20*time.Millisecond, "the process left in the pod's cgroup killed", func() bool {
		select {
		case waitErr = <-exited:
			reaped = true
			return true
		default:
			return false
		}
	})
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process left in the pod's cgroup ended with %v; want killed by SIGKILL", waitErr)
	}
	testenv.Eventually(t, time.Minute, 20*time.Millisecond, "the pod's cgroup removed", func() bool {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				return false
			}
		}
		return true
	})
}
