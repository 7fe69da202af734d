package admission

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// QOSClass is the pod's QoS class, by kubelet's rule (v1.37, with
// PodLevelResources and its QoS fix on, their defaults): status.qosClass when
// set; else, when the pod sets pod-level requests or limits (spec.resources,
// for cpu, memory or hugepages), those alone decide; else every init and
// regular container's do. For each set of requirements, cpu and memory are
// each BestEffort (no request or limit), Guaranteed (request equal to a
// non-zero limit) or Burstable; a set is BestEffort or Guaranteed when both
// are, Burstable otherwise, and the pod is BestEffort or Guaranteed when all
// its containers are the same one of them, Burstable otherwise. A limit with
// no request counts as a request equal to it, as the API server's defaulting
// makes it.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class corev1.PodQOSClass
	for _, cs := range [...][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			switch c := requirementsQOS(&cs[i].Resources); {
			case c == corev1.PodQOSBurstable:
				return c
			case class == "":
				class = c
			case class != c:
				return corev1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// requirementsQOS is the class of one set of requirements: that of cpu and
// memory when they agree, Burstable otherwise.
func requirementsQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	cpu, memory := resourceQOS(r, corev1.ResourceCPU), resourceQOS(r, corev1.ResourceMemory)
	if cpu != memory {
		return corev1.PodQOSBurstable
	}
	return cpu
}

// resourceQOS is the class of one resource: BestEffort when neither request
// nor limit is set above zero, Guaranteed when the request equals a non-zero
// limit (a missing request defaults to the limit), Burstable otherwise.
func resourceQOS(r *corev1.ResourceRequirements, name corev1.ResourceName) corev1.PodQOSClass {
	lim := r.Limits[name]
	req, ok := r.Requests[name]
	if !ok {
		req = lim
	}
	switch {
	case !req.Equal(lim):
		return corev1.PodQOSBurstable
	case req.IsZero():
		return corev1.PodQOSBestEffort
	default:
		return corev1.PodQOSGuaranteed
	}
}
