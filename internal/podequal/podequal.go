// Package podequal compares pod statuses as apimachinery's semantic
// equality (equality.Semantic.DeepEqual) does, without reflection for the
// fields a node writes: a node compares a pod's status with the API's
// copy at every sync and every echo of its own write, and the reflective
// comparison was a tenth of a busy node's CPU.
//
// The rules are the semantic ones: an empty slice or map equals a nil one,
// times are equal when they are the same instant, quantities when their
// values are. Fields a node does not write (resource claims, allocated
// resources, volume mounts, ...) are compared by equality.Semantic itself,
// and only when either side has them.
package podequal

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
)

// Status reports whether a and b are semantically equal.
func Status(a, b *corev1.PodStatus) bool {
	if a == b {
		return true
	}
	if a.Phase != b.Phase || a.PodIP != b.PodIP || a.HostIP != b.HostIP || a.QOSClass != b.QOSClass ||
		a.Message != b.Message || a.Reason != b.Reason || a.NominatedNodeName != b.NominatedNodeName ||
		a.Resize != b.Resize || a.ObservedGeneration != b.ObservedGeneration ||
		len(a.Conditions) != len(b.Conditions) || len(a.HostIPs) != len(b.HostIPs) || len(a.PodIPs) != len(b.PodIPs) ||
		len(a.InitContainerStatuses) != len(b.InitContainerStatuses) || len(a.ContainerStatuses) != len(b.ContainerStatuses) ||
		len(a.EphemeralContainerStatuses) != len(b.EphemeralContainerStatuses) ||
		!timePtr(a.StartTime, b.StartTime) {
		return false
	}
	for i := range a.HostIPs {
		if a.HostIPs[i] != b.HostIPs[i] {
			return false
		}
	}
	for i := range a.PodIPs {
		if a.PodIPs[i] != b.PodIPs[i] {
			return false
		}
	}
	for i := range a.Conditions {
		if !condition(&a.Conditions[i], &b.Conditions[i]) {
			return false
		}
	}
	for _, l := range [][2][]corev1.ContainerStatus{
		{a.ContainerStatuses, b.ContainerStatuses},
		{a.InitContainerStatuses, b.InitContainerStatuses},
		{a.EphemeralContainerStatuses, b.EphemeralContainerStatuses},
	} {
		for i := range l[0] {
			if !container(&l[0][i], &l[1][i]) {
				return false
			}
		}
	}
	// What a node does not write: compared only when present.
	if len(a.ResourceClaimStatuses)+len(b.ResourceClaimStatuses) > 0 && !semantic(a.ResourceClaimStatuses, b.ResourceClaimStatuses) ||
		(a.ExtendedResourceClaimStatus != nil || b.ExtendedResourceClaimStatus != nil) && !semantic(a.ExtendedResourceClaimStatus, b.ExtendedResourceClaimStatus) ||
		len(a.AllocatedResources)+len(b.AllocatedResources) > 0 && !semantic(a.AllocatedResources, b.AllocatedResources) ||
		(a.Resources != nil || b.Resources != nil) && !semantic(a.Resources, b.Resources) ||
		len(a.NodeAllocatableResourceClaimStatuses)+len(b.NodeAllocatableResourceClaimStatuses) > 0 && !semantic(a.NodeAllocatableResourceClaimStatuses, b.NodeAllocatableResourceClaimStatuses) ||
		len(a.VolumeHealth)+len(b.VolumeHealth) > 0 && !semantic(a.VolumeHealth, b.VolumeHealth) {
		return false
	}
	return true
}

func condition(a, b *corev1.PodCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration &&
		a.LastProbeTime.Equal(&b.LastProbeTime) && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

func container(a, b *corev1.ContainerStatus) bool {
	if a.Name != b.Name || a.Ready != b.Ready || a.RestartCount != b.RestartCount || a.Image != b.Image ||
		a.ImageID != b.ImageID || a.ContainerID != b.ContainerID ||
		(a.Started == nil) != (b.Started == nil) || a.Started != nil && *a.Started != *b.Started ||
		(a.StopSignal == nil) != (b.StopSignal == nil) || a.StopSignal != nil && *a.StopSignal != *b.StopSignal ||
		!state(&a.State, &b.State) || !state(&a.LastTerminationState, &b.LastTerminationState) {
		return false
	}
	return !(len(a.AllocatedResources)+len(b.AllocatedResources) > 0 && !semantic(a.AllocatedResources, b.AllocatedResources) ||
		(a.Resources != nil || b.Resources != nil) && !semantic(a.Resources, b.Resources) ||
		len(a.VolumeMounts)+len(b.VolumeMounts) > 0 && !semantic(a.VolumeMounts, b.VolumeMounts) ||
		(a.User != nil || b.User != nil) && !semantic(a.User, b.User) ||
		len(a.AllocatedResourcesStatus)+len(b.AllocatedResourcesStatus) > 0 && !semantic(a.AllocatedResourcesStatus, b.AllocatedResourcesStatus))
}

func state(a, b *corev1.ContainerState) bool {
	if (a.Waiting == nil) != (b.Waiting == nil) || (a.Running == nil) != (b.Running == nil) || (a.Terminated == nil) != (b.Terminated == nil) {
		return false
	}
	if a.Waiting != nil && *a.Waiting != *b.Waiting {
		return false
	}
	if a.Running != nil && !a.Running.StartedAt.Equal(&b.Running.StartedAt) {
		return false
	}
	if x, y := a.Terminated, b.Terminated; x != nil {
		return x.ExitCode == y.ExitCode && x.Signal == y.Signal && x.Reason == y.Reason && x.Message == y.Message &&
			x.ContainerID == y.ContainerID && x.StartedAt.Equal(&y.StartedAt) && x.FinishedAt.Equal(&y.FinishedAt)
	}
	return true
}

// timePtr is semantic equality of two optional times.
func timePtr(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

func semantic(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }
