package podsync

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// recordingWriter is a StatusWriter that keeps what it was given.
type recordingWriter struct {
	mu         sync.Mutex
	statuses   map[types.UID][]corev1.PodStatus
	terminated []types.UID
	removed    []types.UID
}

func (r *recordingWriter) SetPodStatus(pod *corev1.Pod, s corev1.PodStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statuses == nil {
		r.statuses = map[types.UID][]corev1.PodStatus{}
	}
	r.statuses[pod.UID] = append(r.statuses[pod.UID], s)
}
func (r *recordingWriter) PodTerminated(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terminated = append(r.terminated, pod.UID)
}
func (r *recordingWriter) RemovePod(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, uid)
}

// sawWaiting reports whether any status written for uid had its first
// container waiting for reason.
func (r *recordingWriter) sawWaiting(uid types.UID, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.statuses[uid] {
		if w := s.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == reason {
			return true
		}
	}
	return false
}

func (r *recordingWriter) last(uid types.UID) corev1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.statuses[uid]
	if len(s) == 0 {
		return corev1.PodStatus{}
	}
	return s[len(s)-1]
}

type relisterFunc func(context.Context) (map[types.UID]*PodState, error)

func (f relisterFunc) Relist(ctx context.Context) (map[types.UID]*PodState, error) { return f(ctx) }

// t0 and testPod are synctest's, for the tests inside package podsync (which
// synctest, importing podsync, cannot serve).
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	pod.Spec.RestartPolicy = policy
	pod.Spec.HostNetwork = true
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox:1.36"})
	}
	return pod
}
