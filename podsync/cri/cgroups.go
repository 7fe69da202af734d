package cri

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/mountinfo"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
)

// podCgroups keeps the kubelet's pod-level cgroups (its cgroupsPerQOS) on
// the cgroupfs driver: <root>/kubepods, its burstable and besteffort
// children, and one pod<uid> cgroup per pod with the pod's resources,
// created before the sandbox and removed once the pod's containers and
// sandboxes are gone. Containers' own cgroups below it are the runtime's.
type podCgroups struct {
	root   string // Options.CgroupRoot
	mounts []cgroupMount

	mu        sync.Mutex
	qosReady  bool
	burstable map[types.UID]int64 // CPU requests (milli) of burstable pods with a cgroup
}

// cgroupMount is one mounted hierarchy: cgroup v1 with its controllers, or
// the unified cgroup2 hierarchy.
type cgroupMount struct {
	root, mountpoint string // the hierarchy's root path as mounted, and its mount point
	v2               bool
	controllers      map[string]bool
}

// cgroupMounts reads the cgroup hierarchies from a mount table.
func cgroupMounts(table string) ([]cgroupMount, error) {
	ms, err := mountinfo.Read(table)
	if err != nil {
		return nil, err
	}
	var out []cgroupMount
	for _, mt := range ms {
		if mt.FSType != "cgroup" && mt.FSType != "cgroup2" {
			continue
		}
		m := cgroupMount{root: mt.Root, mountpoint: mt.Mountpoint, v2: mt.FSType == "cgroup2", controllers: map[string]bool{}}
		if m.v2 {
			if b, err := os.ReadFile(filepath.Join(m.mountpoint, "cgroup.controllers")); err == nil {
				for _, c := range strings.Fields(string(b)) {
					m.controllers[c] = true
				}
			}
		} else {
			for _, o := range strings.Split(mt.SuperOptions, ",") {
				m.controllers[o] = true
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func newPodCgroups(root, table string) (*podCgroups, error) {
	ms, err := cgroupMounts(table)
	if err != nil {
		return nil, fmt.Errorf("podsync: reading cgroup mounts: %w", err)
	}
	if len(ms) == 0 {
		return nil, errors.New("cri: Options.CgroupsPerQOS: no cgroup hierarchy is mounted")
	}
	if root == "" {
		root = "/"
	}
	return &podCgroups{root: root, mounts: ms, burstable: map[types.UID]int64{}}, nil
}

// dir is cg's directory in hierarchy m, false if m cannot hold it.
func (m cgroupMount) dir(cg string) (string, bool) {
	rel := cg
	if m.root != "/" {
		if !strings.HasPrefix(rel, m.root+"/") {
			return "", false
		}
		rel = strings.TrimPrefix(rel, m.root)
	}
	return filepath.Join(m.mountpoint, rel), true
}

// dirs returns cg's directory in every hierarchy that can hold it.
func (p *podCgroups) dirs(cg string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range p.mounts {
		if d, ok := m.dir(cg); ok && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// podResources is the kubelet's pod-level resource configuration: CPU
// shares from the pod's effective CPU request, a CFS quota only when every
// container has a CPU limit and a memory limit only when every container
// has a memory limit (the sums of the regular containers' and sidecars'
// limits, or the largest init container's when that is more); BestEffort
// pods get the minimum shares and no limits.
type podResources struct {
	shares      int64
	quota       int64 // µs per quotaPeriod; 0: none
	memoryLimit int64 // bytes; 0: none
}

func podResourceConfig(pod *corev1.Pod) podResources {
	if admission.QOSClass(pod) == corev1.PodQOSBestEffort {
		return podResources{shares: minShares}
	}
	cpuReq := effective(pod, corev1.ResourceCPU, func(c *corev1.Container) (resource.Quantity, bool) {
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			return q, true
		}
		q, ok := c.Resources.Limits[corev1.ResourceCPU]
		return q, ok
	})
	r := podResources{shares: min(max(cpuReq*1024/1000, minShares), maxShares)}
	limits := func(name corev1.ResourceName) (int64, bool) {
		all := true
		v := effective(pod, name, func(c *corev1.Container) (resource.Quantity, bool) {
			q, ok := c.Resources.Limits[name]
			if !ok || q.IsZero() {
				all = false
			}
			return q, ok
		})
		return v, all
	}
	cpu, allCPU := limits(corev1.ResourceCPU)
	mem, allMem := limits(corev1.ResourceMemory)
	if pr := pod.Spec.Resources; pr != nil {
		// Pod-level resources, where set, are the pod cgroup's.
		if q, ok := pr.Requests[corev1.ResourceCPU]; ok {
			r.shares = min(max(q.MilliValue()*1024/1000, minShares), maxShares)
		} else if q, ok := pr.Limits[corev1.ResourceCPU]; ok {
			r.shares = min(max(q.MilliValue()*1024/1000, minShares), maxShares)
		}
		if q, ok := pr.Limits[corev1.ResourceCPU]; ok {
			cpu, allCPU = q.MilliValue(), true
		}
		if q, ok := pr.Limits[corev1.ResourceMemory]; ok {
			mem, allMem = q.Value(), true
		}
	}
	if allCPU && cpu > 0 {
		r.quota = max(cpu*quotaPeriod/1000, minQuota)
	}
	if allMem && mem > 0 {
		r.memoryLimit = mem
	}
	return r
}

// effective sums a resource over the regular containers and sidecars and
// takes the largest init container's if that is more: CPU in millicores,
// everything else in units.
func effective(pod *corev1.Pod, name corev1.ResourceName, get func(*corev1.Container) (resource.Quantity, bool)) int64 {
	val := func(c *corev1.Container) int64 {
		q, ok := get(c)
		if !ok {
			return 0
		}
		if name == corev1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	var sum, initMax int64
	for i := range pod.Spec.Containers {
		sum += val(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if podsync.IsSidecar(c) {
			sum += val(c)
		} else {
			initMax = max(initMax, val(c))
		}
	}
	for n, q := range pod.Spec.Overhead {
		if n == name {
			if name == corev1.ResourceCPU {
				sum += q.MilliValue()
			} else {
				sum += q.Value()
			}
		}
	}
	return max(sum, initMax)
}

// sharesToWeight converts cgroup v1 CPU shares to a cgroup v2 cpu.weight.
func sharesToWeight(shares int64) int64 {
	return 1 + ((shares-minShares)*9999)/(maxShares-minShares)
}

// write sets file in cg's directory of every hierarchy of version v2 that
// has controller.
func (p *podCgroups) write(cg, controller string, v2 bool, file, value string) error {
	for _, m := range p.mounts {
		if m.v2 != v2 || !m.controllers[controller] {
			continue
		}
		if d, ok := m.dir(cg); ok {
			if err := os.WriteFile(filepath.Join(d, file), []byte(value), 0); err != nil {
				return fmt.Errorf("podsync: cgroup %s: writing %s: %w", cg, file, err)
			}
		}
	}
	return nil
}

// setCPU sets CPU shares (cpu.weight on cgroup v2) and, when quota > 0, the
// CFS quota per quotaPeriod.
func (p *podCgroups) setCPU(cg string, shares, quota int64) error {
	errs := []error{
		p.write(cg, "cpu", false, "cpu.shares", strconv.FormatInt(shares, 10)),
		p.write(cg, "cpu", true, "cpu.weight", strconv.FormatInt(sharesToWeight(shares), 10)),
	}
	if quota > 0 {
		errs = append(errs,
			p.write(cg, "cpu", false, "cpu.cfs_period_us", strconv.Itoa(quotaPeriod)),
			p.write(cg, "cpu", false, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)),
			p.write(cg, "cpu", true, "cpu.max", fmt.Sprintf("%d %d", quota, quotaPeriod)))
	}
	return errors.Join(errs...)
}

// mkdir creates cg in every hierarchy, one level at a time: on cgroup v1
// each new cpuset cgroup inherits its parent's CPUs and memory nodes; on
// cgroup v2 each parent delegates its controllers to the new child.
func (p *podCgroups) mkdir(cg string) error {
	for _, m := range p.mounts {
		d, ok := m.dir(cg)
		if !ok {
			continue
		}
		var missing []string
		for x := d; x != m.mountpoint && x != "/" && x != "."; x = filepath.Dir(x) {
			if _, err := os.Stat(x); err == nil {
				break
			}
			missing = append(missing, x)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			if err := m.mkdirOne(missing[i]); err != nil {
				return fmt.Errorf("podsync: creating cgroup %s: %w", missing[i], err)
			}
		}
	}
	return nil
}

func (m cgroupMount) mkdirOne(d string) error {
	parent := filepath.Dir(d)
	if m.v2 {
		var enable []string
		for _, c := range []string{"cpu", "cpuset", "memory", "pids", "io", "hugetlb"} {
			if m.controllers[c] {
				enable = append(enable, "+"+c)
			}
		}
		_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0)
	}
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if !m.v2 && m.controllers["cpuset"] {
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
				_ = os.WriteFile(filepath.Join(d, f), b, 0)
			}
		}
	}
	return nil
}

func (p *podCgroups) qosPath(qos string) string {
	return path.Join(p.root, "kubepods", qos)
}

// ensureQOSLocked creates kubepods and its QoS children once, BestEffort
// with the minimum CPU shares.
func (p *podCgroups) ensureQOSLocked() error {
	if p.qosReady {
		return nil
	}
	for _, cg := range []string{p.qosPath(""), p.qosPath("burstable"), p.qosPath("besteffort")} {
		if err := p.mkdir(cg); err != nil {
			return err
		}
	}
	if err := p.setCPU(p.qosPath("besteffort"), minShares, 0); err != nil {
		return err
	}
	p.qosReady = true
	return nil
}

// updateBurstableLocked gives the burstable cgroup the sum of its pods' CPU
// requests as shares, as the kubelet's QoS manager does.
func (p *podCgroups) updateBurstableLocked() error {
	var milli int64
	for _, m := range p.burstable {
		milli += m
	}
	return p.setCPU(p.qosPath("burstable"), min(max(milli*1024/1000, minShares), maxShares), 0)
}

// Ensure creates the pod's cgroup with its resources if it is missing.
func (p *podCgroups) Ensure(pod *corev1.Pod) error {
	cg := PodCgroupParent(pod, CgroupfsDriver, p.root)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ensureQOSLocked(); err != nil {
		return err
	}
	exists := true
	for _, d := range p.dirs(cg) {
		if _, err := os.Stat(d); err != nil {
			exists = false
		}
	}
	if exists {
		return nil
	}
	if admission.QOSClass(pod) == corev1.PodQOSBurstable {
		p.burstable[pod.UID] = effective(pod, corev1.ResourceCPU, func(c *corev1.Container) (resource.Quantity, bool) {
			q, ok := c.Resources.Requests[corev1.ResourceCPU]
			return q, ok
		})
		if err := p.updateBurstableLocked(); err != nil {
			return err
		}
	}
	if err := p.mkdir(cg); err != nil {
		return err
	}
	r := podResourceConfig(pod)
	errs := []error{p.setCPU(cg, r.shares, r.quota)}
	if r.memoryLimit > 0 {
		v := strconv.FormatInt(r.memoryLimit, 10)
		errs = append(errs, p.write(cg, "memory", false, "memory.limit_in_bytes", v), p.write(cg, "memory", true, "memory.max", v))
	}
	return errors.Join(errs...)
}

// Remove deletes the pod's cgroup, whatever its QoS class was, with the
// empty cgroups the runtime left below it. It is called once the runtime
// holds nothing of the pod, so a process still in the cgroup (or below it)
// is one the runtime lost track of: as the kubelet's pod container manager
// does, Remove sends it SIGKILL first. containerd 2 leaves one when a
// RunPodSandbox is cut short (its caller went away) after the sandbox's
// task was created and before its pid was read: the task's init process
// stays in the pod's cgroup after RemovePodSandbox, which reports success.
// A cgroup whose processes have not exited yet fails with EBUSY: the
// caller retries.
func (p *podCgroups) Remove(uid types.UID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, qos := range []string{"", "burstable", "besteffort"} {
		for _, d := range p.dirs(path.Join(p.qosPath(qos), "pod"+string(uid))) {
			if err := killLeft(d); err != nil {
				errs = append(errs, err)
			}
			if err := rmdirTree(d); err != nil {
				errs = append(errs, fmt.Errorf("podsync: removing cgroup %s: %w", d, err))
			}
		}
	}
	if _, ok := p.burstable[uid]; ok {
		delete(p.burstable, uid)
		errs = append(errs, p.updateBurstableLocked())
	}
	return errors.Join(errs...)
}

// killLeft sends SIGKILL to every process in cgroup directory d and the
// cgroups below it; a missing directory, or a process that has exited, is
// no error.
func killLeft(d string) error {
	self := os.Getpid()
	var errs []error
	_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 1 || pid == self {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("podsync: killing process %d left in cgroup %s: %w", pid, p, err))
			}
		}
		return nil
	})
	return errors.Join(errs...)
}

// rmdirTree removes a cgroup directory and the cgroups below it, deepest
// first; a missing one is no error.
func rmdirTree(d string) error {
	var dirs []string
	_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for j := len(dirs) - 1; j >= 0; j-- {
		if err := syscall.Rmdir(dirs[j]); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
	}
	return nil
}

// existingDirs returns the directories of the pod's cgroup that exist, in
// every hierarchy, whatever its QoS class.
func (p *podCgroups) existingDirs(uid types.UID) []string {
	var out []string
	for _, qos := range []string{"", "burstable", "besteffort"} {
		for _, d := range p.dirs(path.Join(p.qosPath(qos), "pod"+string(uid))) {
			if _, err := os.Stat(d); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

// PodCgroupDirs returns the directories of the pod cgroup the syncer made
// for the pod with uid, one per mounted cgroup hierarchy that holds it (on
// cgroup v1, cpuacct and memory among them), or none when CgroupsPerQOS is
// off, the driver is systemd, or the pod has no cgroup. It is what
// nodestatus/usage reads a pod's CPU, memory, process count and network
// from (usage.Options.PodCgroupDirs).
func (c *Syncer) PodCgroupDirs(uid string) []string {
	if c.cgroups == nil {
		return nil
	}
	return c.cgroups.existingDirs(types.UID(uid))
}
