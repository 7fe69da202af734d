package cri

import (
	"os"
	"path"
	"path/filepath"
	"strings"
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
	if got := readCgroup(t, burstable, "cpu", map[bool]string{false: "cpu.shares", true: "cpu.weight"}[v2]); got != want {
		t.Errorf("burstable CPU after the pod left = %q, want %q", got, want)
	}
}
