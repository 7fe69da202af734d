package eviction

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/internal/podres"
	"github.com/nodekit/nodekit/podsync/admission"
)

// The eviction_signal labels of evictions for local storage limits, and
// their messages, as kubelet's.
const (
	SignalEmptyDirLimit           = "emptydirfs.limit"
	SignalPodEphemeralLimit       = "ephemeralpodfs.limit"
	SignalContainerEphemeralLimit = "ephemeralcontainerfs.limit"

	emptyDirMessage           = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralMessage       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralMessage = "Container %s exceeded its local ephemeral storage limit %q. "
)

// localStorageEviction evicts, at once, every active pod over a local
// storage limit, as kubelet's eviction manager does before it looks at the
// node's signals: an emptyDir over its sizeLimit, else the pod over the sum
// of its containers' ephemeral-storage limits (its writable layers, logs
// and local volumes), else a container over its own (its logs, and its
// writable layer unless the image file system is dedicated). A pod without
// usage is skipped; a critical pod is never evicted. It returns the first
// pod evicted.
func (m *Manager) localStorageEviction(ctx context.Context, pods []*corev1.Pod, snap *Snapshot) (*corev1.Pod, error) {
	idx := indexUsage(snap)
	var first *corev1.Pod
	var errs []error
	for _, pod := range pods {
		u := idx[pod.UID]
		if u == nil {
			continue
		}
		signal, msg := localStorageViolation(pod, u, snap.DedicatedImageFS)
		if msg == "" {
			continue
		}
		if admission.IsCritical(pod) {
			klog.FromContext(ctx).Error(nil, "Eviction manager: cannot evict a critical pod", "pod", klog.KObj(pod))
			continue
		}
		// kubelet sets no DisruptionTarget condition for these.
		status := corev1.PodStatus{Phase: corev1.PodFailed, Reason: Reason, Message: msg}
		m.event(pod, nil, corev1.EventTypeWarning, Reason, msg)
		m.metrics.evictions.WithLabelValues(signal).Inc()
		if err := m.o.Killer.Evict(ctx, pod, status, ImmediateGracePeriodSeconds); err != nil {
			errs = append(errs, fmt.Errorf("eviction: evict pod %s/%s: %w", pod.Namespace, pod.Name, err))
		} else {
			klog.FromContext(ctx).Info("Eviction manager: pod is evicted successfully", "pod", klog.KObj(pod), "reason", msg)
		}
		if first == nil {
			first = pod
		}
	}
	if len(errs) > 0 {
		return first, errs[0]
	}
	return first, nil
}

// localStorageViolation returns the first local storage limit pod is over,
// as an eviction_signal label and kubelet's message, or "" when none.
func localStorageViolation(pod *corev1.Pod, u *PodUsage, dedicatedImageFS bool) (signal, msg string) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		used, ok := u.Volumes[v.Name]
		// A copy: String caches its text in the Quantity, which is the
		// shared pod's.
		limit := *v.EmptyDir.SizeLimit
		if ok && quantity(used).Cmp(limit) > 0 {
			return SignalEmptyDirLimit, fmt.Sprintf(emptyDirMessage, v.Name, limit.String())
		}
	}
	if limit, ok := podres.Limits(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceEphemeralStorage]; ok {
		if quantity(u.RootfsBytes+u.LogsBytes+u.VolumeBytes).Cmp(limit) > 0 {
			return SignalPodEphemeralLimit, fmt.Sprintf(podEphemeralMessage, limit.String())
		}
	}
	for _, cu := range u.Containers {
		var limit *resource.Quantity
		for i := range pod.Spec.Containers {
			if c := &pod.Spec.Containers[i]; c.Name == cu.Name {
				limit = c.Resources.Limits.StorageEphemeral()
			}
		}
		if limit == nil || limit.IsZero() {
			continue
		}
		used := cu.LogsBytes
		if !dedicatedImageFS {
			used += cu.RootfsBytes
		}
		if quantity(used).Cmp(*limit) > 0 {
			return SignalContainerEphemeralLimit, fmt.Sprintf(containerEphemeralMessage, cu.Name, limit.String())
		}
	}
	return "", ""
}

func quantity(b uint64) *resource.Quantity {
	return resource.NewQuantity(int64(min(b, 1<<62)), resource.BinarySI)
}
