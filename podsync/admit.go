package podsync

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsource"
)

// admissionOrder returns u's pods in the order kubelet admits additions:
// oldest creation time first. Without Options.Admit, or for updates that add
// nothing, the order is the update's.
func (e *Engine) admissionOrder(u podsource.Update) []*corev1.Pod {
	if e.o.Admit == nil || len(u.Pods) < 2 || u.Op == podsource.OpRemove {
		return u.Pods
	}
	pods := slices.Clone(u.Pods)
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if a == nil || b == nil {
			return cmp.Compare(btoi(a != nil), btoi(b != nil))
		}
		return a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
	})
	return pods
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rejectLocked runs Options.Admit on pod, new to the engine, against the
// admitted pods that run or are stopping. A rejected pod gets a worker that
// is Done at once, so that later updates neither admit it again nor run
// it (or, when the last relist saw it running, one that stops it and is
// then forgotten); its status is kubelet's for a rejected pod and a Warning
// event says why. A pod already terminal or being deleted is not offered (it will
// never run). It reports whether pod was rejected. The caller holds e.mu.
func (e *Engine) rejectLocked(pod *corev1.Pod, now time.Time) bool {
	if e.o.Admit == nil || pod.DeletionTimestamp != nil || isTerminal(pod.Status.Phase) {
		return false
	}
	r := e.o.Admit.Admit(pod, e.activePodsLocked())
	if r.Admit {
		return false
	}
	s := r.Status(QOSClass(pod))
	w := &worker{uid: pod.UID, pod: pod, life: Done, rejected: true, status: &s, firstSeen: now}
	if st := e.cache[pod.UID]; st != nil && len(st.Sandboxes)+len(st.Containers) > 0 {
		// Something of it runs already (an engine restarted on a node that
		// changed): it is stopped, as kubelet stops what it did not admit.
		w.life, w.grace, w.orphan = Terminating, PodGracePeriod(pod), true
		e.scheduleLocked(pod.UID, now)
	}
	e.workers[pod.UID] = w
	e.metrics.rejected.WithLabelValues(r.Reason).Inc()
	if e.o.Recorder != nil {
		e.o.Recorder.Event(pod, corev1.EventTypeWarning, r.Reason, r.Message)
	}
	if e.o.Writer != nil {
		e.o.Writer.SetPodStatus(pod, s)
		// Nothing of it ever ran: its termination is already over, so a
		// deleted API pod can be deleted for good.
		e.o.Writer.PodTerminated(pod)
	}
	return true
}

// rejectedUpdateLocked passes a newer copy of a rejected or evicted pod
// whose worker is Done to the writer, which learns of its deletion from it
// and then deletes it for good. The caller holds e.mu.
func (e *Engine) rejectedUpdateLocked(w *worker, pod *corev1.Pod) {
	w.pod = pod
	if e.o.Writer != nil && pod.DeletionTimestamp != nil {
		e.o.Writer.PodTerminated(pod)
	}
}
