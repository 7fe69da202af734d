package cri

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func resourceList(req, lim string) corev1.ResourceRequirements {
	parse := func(s string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for _, kv := range strings.Fields(s) {
			k, v, _ := strings.Cut(kv, "=")
			l[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: parse(req), Limits: parse(lim)}
}

func TestPodResourceConfig(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name string
		init []corev1.Container
		ctrs []corev1.Container
		pod  *corev1.ResourceRequirements
		want podResources
	}{
		{"best effort", nil, []corev1.Container{{}}, nil, podResources{shares: 2}},
		{"guaranteed", nil, []corev1.Container{{Resources: resourceList("", "cpu=500m memory=128Mi")}, {Resources: resourceList("", "cpu=1 memory=64Mi")}},
			nil, podResources{shares: 1536, quota: 150000, memoryLimit: 192 << 20}},
		{"burstable, one container without limits", nil, []corev1.Container{{Resources: resourceList("cpu=100m", "cpu=200m memory=64Mi")}, {Resources: resourceList("cpu=50m", "")}},
			nil, podResources{shares: 153}},
		{"burstable, tiny request", nil, []corev1.Container{{Resources: resourceList("cpu=1m", "")}}, nil, podResources{shares: 2}},
		{"init container larger than the sum", []corev1.Container{{Resources: resourceList("cpu=2", "cpu=2 memory=1Gi")}},
			[]corev1.Container{{Resources: resourceList("cpu=100m", "cpu=100m memory=10Mi")}},
			nil, podResources{shares: 2048, quota: 200000, memoryLimit: 1 << 30}},
		{"sidecar adds to the sum", []corev1.Container{{RestartPolicy: &always, Resources: resourceList("cpu=100m", "cpu=100m memory=10Mi")}},
			[]corev1.Container{{Resources: resourceList("cpu=100m", "cpu=100m memory=10Mi")}},
			nil, podResources{shares: 204, quota: 20000, memoryLimit: 20 << 20}},
		{"tiny limit gets the minimum quota", nil, []corev1.Container{{Resources: resourceList("", "cpu=1m memory=1Mi")}},
			nil, podResources{shares: 2, quota: 1000, memoryLimit: 1 << 20}},
		{"pod-level limits", nil, []corev1.Container{{Resources: resourceList("cpu=100m", "")}, {}},
			&corev1.ResourceRequirements{Requests: resourceList("cpu=500m", "").Requests, Limits: resourceList("", "cpu=1 memory=256Mi").Limits},
			podResources{shares: 512, quota: 100000, memoryLimit: 256 << 20}},
		{"pod-level memory limit alone", nil, []corev1.Container{{Resources: resourceList("cpu=100m", "")}},
			&corev1.ResourceRequirements{Limits: resourceList("", "memory=64Mi").Limits},
			podResources{shares: 102, memoryLimit: 64 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.ctrs, Resources: tc.pod}}
			if got := podResourceConfig(pod); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSharesToWeight(t *testing.T) {
	for shares, want := range map[int64]int64{2: 1, 1024: 39, 262144: 10000, 102: 4} {
		if got := sharesToWeight(shares); got != want {
			t.Errorf("sharesToWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

// fakeHierarchies writes a mountinfo with a cgroup v1 cpu,cpuacct and a
// memory hierarchy (mounted at the root path) and a cpuset hierarchy mounted
// from /nested, all in temporary directories.
func fakeHierarchies(t *testing.T) (mountinfo string, dirs map[string]string) {
	dir := t.TempDir()
	dirs = map[string]string{}
	var b strings.Builder
	for i, h := range []struct{ name, root, opts string }{
		{"cpu", "/", "rw,cpu,cpuacct"}, {"memory", "/", "rw,memory"}, {"cpuset", "/nested", "rw,cpuset"},
	} {
		d := filepath.Join(dir, "mnt with space", h.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs[h.name] = d
		fmt.Fprintf(&b, "%d 20 0:%d %s %s rw,relatime shared:1 - cgroup cgroup %s\n", 30+i, 40+i, h.root, strings.ReplaceAll(d, " ", `\040`), h.opts)
	}
	fmt.Fprintf(&b, "50 20 0:60 / /proc rw - proc proc rw\n")
	if err := os.WriteFile(filepath.Join(dirs["cpuset"], "cpuset.cpus"), []byte("0-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mountinfo = filepath.Join(dir, "mountinfo")
	if err := os.WriteFile(mountinfo, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return mountinfo, dirs
}

func TestPodCgroupsOnFakeHierarchies(t *testing.T) {
	mountinfo, dirs := fakeHierarchies(t)
	p, err := newPodCgroups("/nested/k8s", mountinfo)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.mounts) != 3 || !p.mounts[0].controllers["cpuacct"] {
		t.Fatalf("mounts %+v", p.mounts)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: resourceList("cpu=250m", "memory=64Mi")}}}}
	if err := p.Ensure(pod); err != nil {
		t.Fatal(err)
	}
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(parts...))
		if err != nil {
			return "missing"
		}
		return strings.TrimSpace(string(b))
	}
	podDir := filepath.Join("nested", "k8s", "kubepods", "burstable", "podu1")
	for _, c := range []struct{ got, want string }{
		{read(dirs["cpu"], podDir, "cpu.shares"), "256"},
		{read(dirs["cpu"], podDir, "cpu.cfs_quota_us"), "missing"}, // no CPU limit
		{read(dirs["memory"], podDir, "memory.limit_in_bytes"), "67108864"},
		{read(dirs["cpu"], "nested/k8s/kubepods/burstable", "cpu.shares"), "256"},
		{read(dirs["cpu"], "nested/k8s/kubepods/besteffort", "cpu.shares"), "2"},
		// The cpuset hierarchy is mounted from /nested: the path below it.
		{read(dirs["cpuset"], "k8s/kubepods/burstable/podu1", "cpuset.cpus"), "0-1"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}

	// The pod's directories, one per hierarchy, for the usage collector.
	if got := p.existingDirs(pod.UID); len(got) != 3 || got[0] != filepath.Join(dirs["cpu"], podDir) {
		t.Errorf("existingDirs = %v, want the pod's directory in each of the 3 hierarchies", got)
	}
	if got := p.existingDirs("other"); len(got) != 0 {
		t.Errorf("existingDirs of a pod without a cgroup = %v, want none", got)
	}

	// Remove: a real cgroup's files vanish with it; here the test removes
	// the ones Ensure wrote.
	for _, d := range []string{filepath.Join(dirs["cpu"], podDir), filepath.Join(dirs["memory"], podDir), filepath.Join(dirs["cpuset"], "k8s/kubepods/burstable/podu1")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			_ = os.Remove(filepath.Join(d, e.Name()))
		}
	}
	if err := p.Remove(pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := read(dirs["cpu"], podDir, "cpu.shares"); got != "missing" {
		t.Errorf("pod cgroup left: %q", got)
	}
	if got := read(dirs["cpu"], "nested/k8s/kubepods/burstable", "cpu.shares"); got != "2" {
		t.Errorf("burstable shares after the pod left = %q, want 2", got)
	}
}

func TestNewPodCgroupsWithoutHierarchies(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(f, []byte("50 20 0:60 / /proc rw - proc proc rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newPodCgroups("/", f); err == nil || !strings.Contains(err.Error(), "CgroupsPerQOS") {
		t.Fatalf("err = %v, want one naming CgroupsPerQOS", err)
	}
}
