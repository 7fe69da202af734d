package podsync

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// QOSClass is the pod's QoS class by the API's rule over the cpu and memory
// requests and limits of all its containers: none set → BestEffort; every
// container with requests equal to non-zero limits for both → Guaranteed;
// else Burstable.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	any, guaranteed := false, true
	check := func(c *corev1.Container) {
		for _, r := range [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				any = true
			}
			if !hasLim || lim.IsZero() {
				guaranteed = false
				continue
			}
			if hasReq && req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// Cgroup drivers.
const (
	CgroupfsDriver = "cgroupfs"
	SystemdDriver  = "systemd"
)

// PodCgroupParent returns the cgroup parent the kubelet gives a pod's
// sandbox: for cgroupfs <root>/kubepods/pod<uid> (Guaranteed) or
// <root>/kubepods/{burstable,besteffort}/pod<uid>; for systemd the slice
// kubepods-<qos>-pod<uid with - as _>.slice (kubepods-pod….slice for
// Guaranteed).
func PodCgroupParent(pod *corev1.Pod, driver, root string) string {
	qos := ""
	switch QOSClass(pod) {
	case corev1.PodQOSBurstable:
		qos = "burstable"
	case corev1.PodQOSBestEffort:
		qos = "besteffort"
	}
	if driver == SystemdDriver {
		name := "kubepods-"
		if qos != "" {
			name += qos + "-"
		}
		return name + "pod" + strings.ReplaceAll(string(pod.UID), "-", "_") + ".slice"
	}
	if root == "" {
		root = "/"
	}
	return path.Join(root, "kubepods", qos, "pod"+string(pod.UID))
}

const (
	minShares     = 2
	maxShares     = 262144
	quotaPeriod   = 100000 // µs
	minQuota      = 1000
	guaranteedOOM = -997
	bestEffortOOM = 1000
)

// linuxResources is the kubelet's translation of a container's resources.
func linuxResources(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq, hasReq := c.Resources.Requests[corev1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[corev1.ResourceCPU]
	milli := int64(0)
	if hasReq {
		milli = cpuReq.MilliValue()
	} else if hasLim {
		milli = cpuLim.MilliValue()
	}
	r.CpuShares = min(max(milli*1024/1000, minShares), maxShares)
	if hasLim && !cpuLim.IsZero() {
		r.CpuPeriod = quotaPeriod
		r.CpuQuota = max(cpuLim.MilliValue()*quotaPeriod/1000, minQuota)
	}
	if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = m.Value()
	}
	r.OomScoreAdj = oomScoreAdj(pod, c, memoryCapacity)
	return r
}

// oomScoreAdj: Guaranteed −997, BestEffort 1000, Burstable
// 1000−1000·request/capacity within [3, 999].
func oomScoreAdj(pod *corev1.Pod, c *corev1.Container, capacity int64) int64 {
	switch QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOM
	case corev1.PodQOSBestEffort:
		return bestEffortOOM
	}
	if capacity <= 0 {
		return bestEffortOOM - 1
	}
	req := c.Resources.Requests.Memory().Value()
	adj := 1000 - (1000*req)/capacity
	return min(max(adj, 1000+guaranteedOOM), bestEffortOOM-1)
}
