package podsync

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodSyncer is the pod-level seam, the kubelet's split of a pod's life: the
// engine calls SyncPod while the pod should run, SyncTerminatingPod until it
// returns nil once the pod must stop, then SyncTerminatedPod once. The CRI
// syncer (podsync/cri) runs pods on a container runtime; podsynctest simulates
// them; a virtual node can plug in its own backend. observed is the backend's
// own last relist of the pod (nil when nothing of it runs). Calls for one pod
// never overlap; calls for different pods do.
type PodSyncer interface {
	// SyncPod makes what runs match pod and says when it wants to be called
	// again and why containers wait.
	SyncPod(ctx context.Context, pod *corev1.Pod, observed *PodState) (SyncResult, error)
	// SyncTerminatingPod stops every container of the pod within
	// gracePeriod (running preStop hooks) and its sandbox.
	SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, observed *PodState, gracePeriod time.Duration) error
	// SyncTerminatedPod releases what the stopped pod still holds.
	SyncTerminatedPod(ctx context.Context, pod *corev1.Pod, observed *PodState) error
}

// PodCleaner is a PodSyncer that keeps something of a pod past
// SyncTerminatedPod, for as long as a source still has the pod: the CRI
// syncer keeps the pod's container logs, which `kubectl logs` reads after
// the pod completed. The engine calls CleanupPod once it forgets the pod:
// every source removed it (the API pod was deleted, the static manifest
// removed), or it was an orphan. A failed CleanupPod is logged and
// called again ErrorBackoff later, until it succeeds.
type PodCleaner interface {
	CleanupPod(ctx context.Context, pod *corev1.Pod) error
}

// Relister observes the backend: what runs, per pod UID, for every pod the
// backend knows (including pods nobody asked it to run any more).
type Relister interface {
	Relist(ctx context.Context) (map[types.UID]*PodState, error)
}

// PodRelister is a Relister that can also observe one pod: after
// SyncTerminatingPod the engine reads the pod alone, as the kubelet does,
// and runs SyncTerminatedPod in the same sync instead of after the next
// relist. It returns nil when nothing of the pod is left.
type PodRelister interface {
	Relister
	RelistPod(ctx context.Context, uid types.UID) (*PodState, error)
}

// SyncResult is what SyncPod reports besides an error.
type SyncResult struct {
	// RequeueAfter asks for another SyncPod this soon (crash-loop or image
	// pull back-off ending); 0: the engine's resync period.
	RequeueAfter time.Duration
	// Waiting holds why containers that should run do not, by name
	// (CrashLoopBackOff, ErrImagePull, …); the status shows them.
	Waiting map[string]Waiting
	// Changed: the sync changed what runs, so the engine observes the pod
	// at once (RelistPod with a PodRelister, else a full relist).
	Changed bool
}

// SetWaiting records why container name waits.
func (r *SyncResult) SetWaiting(name, reason, message string) {
	if r.Waiting == nil {
		r.Waiting = map[string]Waiting{}
	}
	r.Waiting[name] = Waiting{Reason: reason, Message: message}
}

// RequeueWithin asks for the next sync within d (the earliest ask wins).
func (r *SyncResult) RequeueWithin(d time.Duration) {
	if d > 0 && (r.RequeueAfter == 0 || d < r.RequeueAfter) {
		r.RequeueAfter = d
	}
}

// BackOffResult is the SyncResult of the planner's back-offs alone: each
// held container waits in CrashLoopBackOff, and the next sync is due when
// the first back-off ends.
func (a *PodActions) BackOffResult(now time.Time) SyncResult {
	var r SyncResult
	for _, b := range a.BackOff {
		r.SetWaiting(b.Name, ReasonCrashLoopBackOff, b.Message)
		r.RequeueWithin(b.Until.Sub(now))
	}
	return r
}

// SyncerFuncs adapts three functions to PodSyncer; a nil function does
// nothing.
type SyncerFuncs struct {
	Sync        func(ctx context.Context, pod *corev1.Pod, observed *PodState) (SyncResult, error)
	Terminating func(ctx context.Context, pod *corev1.Pod, observed *PodState, gracePeriod time.Duration) error
	Terminated  func(ctx context.Context, pod *corev1.Pod, observed *PodState) error
}

// SyncPod calls f.Sync.
func (f SyncerFuncs) SyncPod(ctx context.Context, pod *corev1.Pod, observed *PodState) (SyncResult, error) {
	if f.Sync == nil {
		return SyncResult{}, nil
	}
	return f.Sync(ctx, pod, observed)
}

// SyncTerminatingPod calls f.Terminating.
func (f SyncerFuncs) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, observed *PodState, grace time.Duration) error {
	if f.Terminating == nil {
		return nil
	}
	return f.Terminating(ctx, pod, observed, grace)
}

// SyncTerminatedPod calls f.Terminated.
func (f SyncerFuncs) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod, observed *PodState) error {
	if f.Terminated == nil {
		return nil
	}
	return f.Terminated(ctx, pod, observed)
}

var _ PodSyncer = SyncerFuncs{}

// StatusWriter receives the statuses podsync computes. podsync/status.Writer
// implements it; nil: standalone, nothing is written. A writer with a
// method SeeAPIPod(*corev1.Pod) (status.Writer has one) is also handed each
// newer copy of an API pod whose status alone changed. The engine calls it
// from its pod workers' goroutines: concurrently for different pods, in
// order for one pod, and SetPodStatus only when the status changed.
type StatusWriter interface {
	SetPodStatus(pod *corev1.Pod, status corev1.PodStatus)
	// PodTerminated: SyncTerminatedPod finished; for a deleted API pod the
	// writer performs the final DELETE.
	PodTerminated(pod *corev1.Pod)
	RemovePod(uid types.UID)
}

// apiPodSeer is what a StatusWriter may have besides: SeeAPIPod takes a
// newer copy of an API pod whose status alone changed in its source (no
// status follows for it). podsync/status.Writer has it. The engine calls
// it while it applies a source's update, under its own lock: it must not
// block or call the engine.
type apiPodSeer interface {
	SeeAPIPod(pod *corev1.Pod)
}

// PodGracePeriod is the kubelet's grace period for stopping a whole pod:
// deletionGracePeriodSeconds when set, else the spec's
// terminationGracePeriodSeconds (30 when unset), at least 1s.
func PodGracePeriod(pod *corev1.Pod) time.Duration {
	s := int64(30)
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		s = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		s = *pod.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(max(s, 1)) * time.Second
}
