// Package podres wraps k8s.io/component-helpers' pod resource sums so that
// they never write into the pod they are given.
//
// resourcehelper.PodRequests and PodLimits put a pod's own pod-level
// quantities (spec.resources) into their result and then add its
// spec.overhead to them in place; a resource.Quantity held in its decimal
// form shares that decimal with the pod's, so the addition changes the
// pod's spec too, again on every call. The pods nodekit's parts hand each
// other are shared and never modified, so here such a pod's pod-level
// resources are copied first.
package podres

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Requests is resourcehelper.PodRequests without writing into pod.
func Requests(pod *corev1.Pod, opts resourcehelper.PodResourcesOptions) corev1.ResourceList {
	return resourcehelper.PodRequests(safe(pod), opts)
}

// Limits is resourcehelper.PodLimits without writing into pod.
func Limits(pod *corev1.Pod, opts resourcehelper.PodResourcesOptions) corev1.ResourceList {
	return resourcehelper.PodLimits(safe(pod), opts)
}

// safe returns pod, or a shallow copy of it with its own pod-level
// resources when the helpers would add overhead to them.
func safe(pod *corev1.Pod) *corev1.Pod {
	if pod.Spec.Resources == nil || len(pod.Spec.Overhead) == 0 {
		return pod
	}
	cp := *pod
	cp.Spec.Resources = pod.Spec.Resources.DeepCopy()
	return &cp
}
