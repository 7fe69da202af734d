package podsync

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/admission"
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

// admitLocked runs Options.Admit on pod, new to the engine, against the
// admitted pods that run or are stopping. A rejected pod gets a worker that
// is Done at once, so that later updates neither admit it again nor run
// it (or, when the last relist saw it running, one that stops it and is
// then forgotten); its status is kubelet's for a rejected pod and a Warning
// event says why. A pod already terminal or being deleted is not offered (it will
// never run). It reports whether pod was admitted, and the pods to preempt
// for it (Result.Preempt). The caller holds e.mu.
func (e *Engine) admitLocked(pod *corev1.Pod, now time.Time) (bool, admission.Result) {
	if e.o.Admit == nil || pod.DeletionTimestamp != nil || isTerminal(pod.Status.Phase) {
		return true, admission.Admitted
	}
	r := e.o.Admit.Admit(pod, e.activePodsLocked())
	if r.Admit {
		return true, r
	}
	s := r.Status(admission.QOSClass(pod))
	s.ObservedGeneration = pod.Generation // as the kubelet's status manager sets it
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
	return false, r
}

// preemptLocked stops the pods r.Preempt names to make room for w's pod,
// admitted by preemption, as kubelet's critical-pod admission does: each
// gets admission.PreemptedStatus laid over its status (as Evict lays an
// eviction's), its own grace period, and a Warning Preempting event; w's
// pod does not start before they are stopped (Terminated), or before the
// longest of their grace periods × 1.5 (at least 10s, kubelet's wait for a
// kill) has passed. Pods that are no longer active are skipped. The caller
// holds e.mu.
func (e *Engine) preemptLocked(w *worker, r admission.Result, now time.Time) {
	wait := time.Duration(0)
	signal := strings.TrimPrefix(r.Reason, admission.ReasonOutOfPrefix)
	for _, v := range r.Preempt {
		vw := e.workers[v.UID]
		if vw == nil || vw.orphan || vw.rejected || (vw.life != Syncing && vw.life != Terminating) {
			continue
		}
		s := admission.PreemptedStatus(vw.pod)
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		}
		grace := PodGracePeriod(vw.pod)
		e.evictLocked(vw, &s, grace, now)
		vw.preemptor = w.uid
		w.waitFor = append(w.waitFor, vw.uid)
		wait = max(wait, grace*3/2, preemptMinWait)
		e.metrics.preemptions.WithLabelValues(signal).Inc()
		if e.o.Recorder != nil {
			e.o.Recorder.Event(vw.pod, corev1.EventTypeWarning, admission.ReasonPreempting, admission.PreemptedMessage)
		}
	}
	w.waitUntil = now.Add(wait)
}

// preemptMinWait is the least a preempting pod waits for its victims.
const preemptMinWait = 10 * time.Second

// preemptionWaitLocked reports whether w's pod, admitted by preemption,
// must still wait for its victims to stop; if so it is due again when the
// wait ends (a victim that stops makes it due sooner). The caller holds
// e.mu.
func (e *Engine) preemptionWaitLocked(w *worker, now time.Time) bool {
	if len(w.waitFor) == 0 {
		return false
	}
	w.waitFor = slices.DeleteFunc(w.waitFor, func(uid types.UID) bool {
		v := e.workers[uid]
		return v == nil || v.life == Terminated || v.life == Done
	})
	if len(w.waitFor) == 0 || !now.Before(w.waitUntil) {
		w.waitFor = nil
		return false
	}
	e.scheduleLocked(w.uid, w.waitUntil)
	return true
}

// victimStoppedLocked makes the pod w was preempted for due, now that w is
// stopped. The caller holds e.mu.
func (e *Engine) victimStoppedLocked(w *worker, now time.Time) {
	if w.preemptor == "" {
		return
	}
	if _, ok := e.workers[w.preemptor]; ok {
		e.scheduleLocked(w.preemptor, now)
	}
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
