package podsync

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's reason and message for a pod stopped at its
// activeDeadlineSeconds.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// deadlineLeft is how long pod, whose status s has its start time, may
// still run under spec.activeDeadlineSeconds; false when it has no
// deadline (or no start time yet).
func deadlineLeft(pod *corev1.Pod, s corev1.PodStatus, now time.Time) (time.Duration, bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || s.StartTime == nil || s.StartTime.IsZero() {
		return 0, false
	}
	deadline := s.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
	return deadline.Sub(now), true
}

// deadlineExceededLocked stops w's pod, past its deadline, as the kubelet
// does: its status becomes Failed with DeadlineExceeded once its
// containers are stopped (within the pod's grace period), and a Normal
// event says why. The caller holds e.mu.
func (e *Engine) deadlineExceededLocked(w *worker, now time.Time) {
	e.evictLocked(w, &corev1.PodStatus{Phase: corev1.PodFailed, Reason: ReasonDeadlineExceeded, Message: MessageDeadlineExceeded}, PodGracePeriod(w.pod), now)
	if e.o.Recorder != nil {
		e.o.Recorder.Event(w.pod, corev1.EventTypeNormal, ReasonDeadlineExceeded, MessageDeadlineExceeded)
	}
}
