package eviction_test

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/eviction"
)

const (
	Mi = 1 << 20
	Gi = 1 << 30
)

type podOpt func(*corev1.Pod)

// newPod is a pod named name (UID name too) with one container "app".
func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func request(name corev1.ResourceName, q string) podOpt {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[name] = resource.MustParse(q)
	}
}

func priority(v int32) podOpt { return func(p *corev1.Pod) { p.Spec.Priority = &v } }

func gracePeriod(s int64) podOpt {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
}

func static() podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{podsource.ConfigSourceAnnotation: podsource.FileSource}
	}
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// memUsage is a pod's usage with a working set, all in container "app".
func memUsage(uid string, bytes uint64) eviction.PodUsage {
	return eviction.PodUsage{UID: types.UID(uid), MemoryWorkingSetBytes: bytes,
		Containers: []eviction.ContainerUsage{{Name: "app", MemoryWorkingSetBytes: bytes}}}
}

// diskUsage is a pod's disk usage: rootfs, logs and volumes.
func diskUsage(uid string, rootfs, logs, vols uint64) eviction.PodUsage {
	return eviction.PodUsage{UID: types.UID(uid), RootfsBytes: rootfs, LogsBytes: logs, VolumeBytes: vols,
		RootfsInodes: rootfs / Mi, LogsInodes: logs / Mi, VolumeInodes: vols / Mi,
		Containers: []eviction.ContainerUsage{{Name: "app", RootfsBytes: rootfs, LogsBytes: logs}}}
}
