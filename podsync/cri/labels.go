package cri

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsync"
)

// Labels and annotations the kubelet puts on sandboxes and containers, and
// podsync with it, so crictl shows the same and a restarted agent (or a
// kubelet) adopts what runs.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash                     = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationContainerTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationContainerTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationContainerPreStopHandler           = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts                    = "io.kubernetes.container.ports"
	AnnotationPodDeletionGracePeriod            = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGracePeriod         = "io.kubernetes.pod.terminationGracePeriod"
)

// sandboxLabels are the pod's labels plus the three io.kubernetes.pod ones.
func sandboxLabels(pod *corev1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	return l
}

func containerLabels(pod *corev1.Pod, c *corev1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
	}
}

func containerAnnotations(pod *corev1.Pod, c *corev1.Container, restartCount int) map[string]string {
	a := make(map[string]string, len(c.Env)+8)
	a[AnnotationContainerHash] = podsync.HashContainer(c)
	a[AnnotationContainerRestartCount] = strconv.Itoa(restartCount)
	a[AnnotationContainerTerminationMessagePath] = c.TerminationMessagePath
	a[AnnotationContainerTerminationMessagePolicy] = string(c.TerminationMessagePolicy)
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if js, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationContainerPreStopHandler] = string(js)
		}
	}
	if len(c.Ports) > 0 {
		if js, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(js)
		}
	}
	return a
}
