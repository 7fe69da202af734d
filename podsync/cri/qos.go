package cri

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync/admission"
)

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
	switch admission.QOSClass(pod) {
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
	switch admission.QOSClass(pod) {
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
