package podsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ErrPodNotActive is returned (wrapped) by Evict for a pod the engine does
// not run: unknown, an orphan, rejected at admission, or already stopped
// (Terminated or Done).
var ErrPodNotActive = errors.New("pod is not active")

// Evict stops pod, which the engine runs (its worker is Syncing or
// Terminating), within gracePeriod seconds (at least 1), as the kubelet's
// pod-kill path for evictions does; it has eviction.Killer's signature, so
// an Engine is the eviction manager's Killer. A shorter grace restarts a
// termination in progress; a longer one does not lengthen it.
//
// status is laid over the status the engine generates for the pod from
// then on: its conditions (the DisruptionTarget condition) replace the
// generated ones of the same type at once, and its phase (Failed), reason
// (Evicted) and message once the pod's containers are stopped for good, in
// the final status handed to the StatusWriter (which holds a terminal phase
// only once nothing can run, as the kubelet's status manager holds it back).
// A second Evict lays its status over the first's.
//
// Evict never waits for the termination. After it the worker ends Done, as
// every terminated pod's: later updates of the pod (its API copy now
// Failed) never start it again. A pod the engine does not run is an error
// wrapping ErrPodNotActive.
func (e *Engine) Evict(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus, gracePeriod int64) error {
	if pod == nil {
		return fmt.Errorf("podsync: evict: no pod: %w", ErrPodNotActive)
	}
	grace := time.Duration(min(max(gracePeriod, 1), math.MaxInt64/int64(time.Second))) * time.Second
	s := status.DeepCopy()
	e.mu.Lock()
	w := e.workers[pod.UID]
	if w == nil || w.orphan || w.rejected || (w.life != Syncing && w.life != Terminating) {
		state := "unknown to the engine"
		switch {
		case w == nil:
		case w.orphan:
			state = "an orphan"
		case w.rejected:
			state = "rejected at admission"
		default:
			state = w.life.String()
		}
		e.mu.Unlock()
		return fmt.Errorf("podsync: evict pod %s/%s (%s): %s: %w", pod.Namespace, pod.Name, pod.UID, state, ErrPodNotActive)
	}
	e.evictLocked(w, s, grace, e.o.Clock.Now())
	e.mu.Unlock()
	e.poke()
	klog.FromContext(ctx).V(2).Info("Evicting pod", "pod", klog.KObj(pod), "podUID", pod.UID, "gracePeriod", grace, "reason", status.Reason)
	return nil
}

// evictLocked lays s over w's status from now on, starts its termination
// with grace (which only shrinks) and makes it due. The caller holds e.mu;
// s is not changed after.
func (e *Engine) evictLocked(w *worker, s *corev1.PodStatus, grace time.Duration, now time.Time) {
	if w.evict != nil {
		// The stored status is never changed in place: jobs share it.
		merged := w.evict.DeepCopy()
		overlayEviction(merged, s)
		s = merged
	}
	w.evict = s
	e.terminateLocked(w, grace)
	e.scheduleLocked(w.uid, now)
	if w.busy {
		w.pending = true
	}
}

// ActivePods returns the admitted pods whose worker is Syncing or
// Terminating (the kubelet's active pods): not rejected, not orphans, not
// terminated. They are the engine's own copies, oldest first by creation
// time (then namespace, name): callers must not modify them.
func (e *Engine) ActivePods() []*corev1.Pod {
	e.mu.Lock()
	pods := e.activePodsLocked()
	e.mu.Unlock()
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return pods
}

// activePodsLocked returns the pods of workers that are Syncing or
// Terminating, neither orphans nor rejected, in no order. The caller holds
// e.mu.
func (e *Engine) activePodsLocked() []*corev1.Pod {
	var active []*corev1.Pod
	for _, w := range e.workers {
		if !w.orphan && !w.rejected && w.pod != nil && (w.life == Syncing || w.life == Terminating) {
			active = append(active, w.pod)
		}
	}
	return active
}

// overlayEviction lays ev over s: its conditions replace those of s of the
// same type (keeping their transition time when the status is the same) or
// are added; its phase, reason and message, when set, replace those of s.
func overlayEviction(s, ev *corev1.PodStatus) {
	if ev.Phase != "" {
		s.Phase = ev.Phase
	}
	if ev.Reason != "" {
		s.Reason = ev.Reason
	}
	if ev.Message != "" {
		s.Message = ev.Message
	}
	s.Conditions = mergeConditions(s.Conditions, ev.Conditions)
}

// mergeConditions returns conds with add merged in by type, in a new slice.
func mergeConditions(conds, add []corev1.PodCondition) []corev1.PodCondition {
	if len(add) == 0 {
		return conds
	}
	out := slices.Clone(conds)
	for _, c := range add {
		i := slices.IndexFunc(out, func(o corev1.PodCondition) bool { return o.Type == c.Type })
		if i < 0 {
			out = append(out, c)
			continue
		}
		if out[i].Status == c.Status && !out[i].LastTransitionTime.IsZero() {
			c.LastTransitionTime = out[i].LastTransitionTime
		}
		out[i] = c
	}
	return out
}
