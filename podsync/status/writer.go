package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/podequal"
	"github.com/nodekit/nodekit/internal/timerheap"
	"github.com/nodekit/nodekit/podsource"
)

// Writer writes the statuses the node computes for its pods to the API
// server: kubelet's status manager. Its methods are safe for concurrent use;
// SetPodStatus, PodTerminated and RemovePod never wait on the network.
type Writer struct {
	podClient func(namespace string) PodClient
	clock     clock.WithTicker
	reconcile time.Duration
	parallel  int
	delay     time.Duration // Options.PendingDelay
	metrics   *metrics
	wake      chan struct{}

	syncMu sync.Mutex // one SyncOnce at a time

	mu            sync.Mutex
	pods          map[types.UID]*podState
	dirty         map[types.UID]struct{}
	retry         timerheap.Heap[types.UID]
	backoffs      backoff.Map[types.UID]
	nextReconcile time.Time
}

// podState is what the writer knows of one pod, by the pod's UID as the
// node knows it (a static pod's own UID, not its mirror pod's).
type podState struct {
	namespace, name string
	nodeName        string // spec.nodeName, when set
	static          bool
	hash            string // static pods: the config hash their mirror pod carries

	// status is the node's status, nil until the first: replaced whole,
	// never changed in place, and once the API shows it, the API copy's own.
	status  *corev1.PodStatus
	version uint64 // bumped by every change of status

	// api is the pod as the API showed it last (a static pod's mirror pod),
	// from the caller or from a response; replaced whole, never changed in
	// place. Nil for a static pod whose mirror pod is not known.
	api *corev1.Pod

	deleting   bool // the API pod's graceful deletion began
	terminated bool // PodTerminated was called: nothing runs any more
	finished   bool // deleted by the writer, or gone from the API: nothing more to write
	// delayed: a Pending-to-Pending change waits in retry for
	// Options.PendingDelay to end (not a failure's back-off).
	delayed bool
	// synced is what the last sync that ended synced worked from: while
	// the pod's state is still that, another sync would find nothing to
	// write, and a reconcile skips the pod without computing a patch.
	synced syncedState
}

// syncedState is what a sync of one pod depends on.
type syncedState struct {
	version              uint64
	api                  *corev1.Pod
	deleting, terminated bool
}

// upToDate reports whether the pod's API copy is known and nothing has
// changed since its last successful sync worked from it.
func (st *podState) upToDate() bool { return st.api != nil && st.synced == st.current() }

// current is what a sync of st would work from now.
func (st *podState) current() syncedState {
	return syncedState{version: st.version, api: st.api, deleting: st.deleting, terminated: st.terminated}
}

// New checks the options and returns a Writer.
func New(o Options) (*Writer, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("status: Options.Registerer: %w", err)
	}
	w := &Writer{
		podClient: o.Pods,
		clock:     o.Clock,
		reconcile: o.ReconcilePeriod,
		parallel:  o.MaxParallelWrites,
		delay:     o.PendingDelay,
		metrics:   m,
		wake:      make(chan struct{}, 1),
		pods:      map[types.UID]*podState{},
		dirty:     map[types.UID]struct{}{},
		backoffs:  backoff.Map[types.UID]{Initial: o.RetryBackoff, Max: o.MaxRetryBackoff},
	}
	w.nextReconcile = o.Clock.Now().Add(o.ReconcilePeriod)
	return w, nil
}

func isMirror(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[podsource.ConfigMirrorAnnotation]
	return ok
}

func isStatic(pod *corev1.Pod) bool {
	src, ok := pod.Annotations[podsource.ConfigSourceAnnotation]
	return ok && src != podsource.APISource
}

// mirrorOf reports whether m is the mirror pod of the static pod whose
// config hash is hash.
func mirrorOf(m *corev1.Pod, hash string) bool {
	h, ok := m.Annotations[podsource.ConfigMirrorAnnotation]
	return ok && (hash == "" || h == hash)
}

// newer reports whether resource version a is later than b; false when
// either is not a comparable resource version.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

// state returns pod's state, creating it. The caller holds w.mu.
func (w *Writer) state(pod *corev1.Pod) *podState {
	st, ok := w.pods[pod.UID]
	if !ok {
		st = &podState{namespace: pod.Namespace, name: pod.Name, nodeName: pod.Spec.NodeName, static: isStatic(pod)}
		if st.static {
			st.hash = pod.Annotations[podsource.ConfigHashAnnotation]
			if st.hash == "" {
				st.hash = string(pod.UID)
			}
		}
		w.pods[pod.UID] = st
	}
	return st
}

// see takes what the caller's copy of an API pod says of the API: its
// deletion, and its status when the copy is newer than the one held. It
// reports whether the API view changed. A copy of the very version held
// (the same resource version: the watch's echo of the writer's own patch)
// replaces it too, changing nothing, so that one copy of the pod's API
// status is kept, not two.
func (st *podState) see(pod *corev1.Pod) bool {
	if st.static {
		return false
	}
	if pod.DeletionTimestamp != nil {
		st.deleting = true
	}
	switch {
	case st.api == nil || newer(pod.ResourceVersion, st.api.ResourceVersion):
		st.api = pod
		st.share()
		return true
	case st.api != pod && sameVersion(pod, st.api):
		if st.synced.api == st.api {
			st.synced.api = pod
		}
		shared := st.sharesAPI()
		st.api = pod
		if shared {
			// Another copy of the same version: the same status.
			st.status = &pod.Status
		} else {
			st.share()
		}
	}
	return false
}

// share makes the node's status the API copy's own when the two are equal,
// as they are once the API shows what the writer wrote: both are replaced
// whole and never changed in place, so the writer's copy can go, and a
// pod's status is held once, not twice.
func (st *podState) share() {
	if st.version == 0 || st.api == nil || st.sharesAPI() {
		return
	}
	if podequal.Status(st.status, &st.api.Status) {
		st.status = &st.api.Status
	}
}

// sharesAPI reports whether the node's status is the API copy's own.
func (st *podState) sharesAPI() bool {
	return st.status == &st.api.Status
}

// sameVersion reports whether a and b are copies of one version of one pod.
func sameVersion(a, b *corev1.Pod) bool {
	return a.UID == b.UID && a.ResourceVersion != "" && a.ResourceVersion == b.ResourceVersion
}

// settle settles the node's new status s against what came before: the
// node's last status, else the API's (see the package function settle); a
// terminal phase the API has is kept too.
func (st *podState) settle(s *corev1.PodStatus, now time.Time) {
	var old corev1.PodStatus
	switch {
	case st.version > 0:
		old = *st.status
	case st.api != nil:
		old = st.api.Status
	}
	settle(s, &old, now)
	if st.api != nil && terminal(st.api.Status.Phase) {
		keepTerminal(s, &st.api.Status)
		notReadyIfTerminal(s, metav1.NewTime(now).Rfc3339Copy())
	}
}

// mayWait reports whether st's status may wait for Options.PendingDelay:
// the pod is Pending in the API and stays so, and neither its deletion nor
// its termination began.
func (st *podState) mayWait() bool {
	return st.api != nil && st.api.Status.Phase == corev1.PodPending && st.status.Phase == corev1.PodPending &&
		!st.deleting && !st.terminated && st.api.DeletionTimestamp == nil
}

// set records s as st's status (when it says something new) and marks the
// pod for the next sync. The caller holds w.mu.
func (w *Writer) set(uid types.UID, st *podState, s corev1.PodStatus, apiChanged bool) {
	if st.version > 0 && sameStatus(st.status, &s) {
		if !apiChanged {
			return
		}
	} else {
		st.status = &s
		st.version++
	}
	if w.delay > 0 && st.mayWait() {
		// Written when the delay ends, or at once by a change that may
		// not wait; a pod backing off after a failure keeps its retry.
		if _, backingOff := w.retry.Due(uid); !st.delayed && !backingOff {
			st.delayed = true
			w.retry.Set(uid, w.clock.Now().Add(w.delay))
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
		return
	}
	if st.delayed {
		st.delayed = false
		w.retry.Remove(uid)
	}
	w.dirty[uid] = struct{}{}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// SetPodStatus records the status the node computed for pod. pod is the pod
// as the node knows it: for a static pod, the static pod (kubernetes.io/
// config.source not "api"), whose status goes to its mirror pod, found by
// namespace and name; for an API pod, the node's latest copy of it, whose
// status and deletion the writer takes as the API's when its resource
// version is newer than the copy it holds. Mirror pods themselves are
// ignored. The writer keeps pod: the caller must not modify it afterwards.
//
// It never blocks: the latest status wins, and statuses set between two
// syncs are written as one. Condition transition times move only when a
// condition's status changes, the start time is kept once set, and a
// terminal phase (Succeeded, Failed) once recorded or seen in the API is
// never left; a terminal phase turns Ready and ContainersReady False.
//
// The writer trusts the caller on when a phase may turn terminal: pass a
// terminal phase only once none of the pod's containers can run any more
// (kubelet holds it back itself; nodekit's pod workers only generate it
// then). Container-level rules (a terminated container does not run again
// unless its restart policy allows) are the caller's too, with Status to
// check against.
func (w *Writer) SetPodStatus(pod *corev1.Pod, status corev1.PodStatus) {
	if pod == nil || isMirror(pod) {
		return
	}
	now := w.clock.Now()
	s := *status.DeepCopy()
	normalize(pod, &s)
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state(pod)
	if st.finished {
		return
	}
	changed := st.see(pod)
	st.settle(&s, now)
	w.set(pod.UID, st, s, changed)
}

// SetMirrorPod hands the writer the mirror pod of one of its static pods,
// as the API server answered its creation (MirrorPodsOptions.Created) or a
// watch showed it: a status waiting for its mirror pod is then written to
// it at once, with no read and no back-off. A pod that is not a mirror pod,
// or that matches no static pod by namespace, name and config hash, is
// ignored; so is a copy older than the one held. The writer keeps mirror:
// the caller must not modify it afterwards. It never blocks.
func (w *Writer) SetMirrorPod(mirror *corev1.Pod) {
	if mirror == nil || !isMirror(mirror) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, st := range w.pods {
		if !st.static || st.finished || st.namespace != mirror.Namespace || st.name != mirror.Name || !mirrorOf(mirror, st.hash) {
			continue
		}
		if st.api != nil && (st.api.UID == mirror.UID && !newer(mirror.ResourceVersion, st.api.ResourceVersion)) {
			continue
		}
		st.api, st.delayed = mirror, false
		w.backoffs.Forget(uid)
		w.retry.Remove(uid)
		w.dirty[uid] = struct{}{}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// SeeAPIPod hands the writer a newer copy of an API pod whose status alone
// changed (the node's pod workers have nothing to do for it, so no
// SetPodStatus follows): its status and deletion are taken as the API's as
// SetPodStatus takes them. A pod the writer has no status for, a static or
// mirror pod, and a copy older than the one held are ignored. The writer
// keeps pod: the caller must not modify it afterwards. It never blocks.
func (w *Writer) SeeAPIPod(pod *corev1.Pod) {
	if pod == nil || isMirror(pod) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.pods[pod.UID]
	if !ok || st.finished || st.version == 0 {
		return
	}
	if st.see(pod) {
		// Settled again against the new copy, as SetPodStatus would: a
		// terminal phase it shows is kept.
		s := *st.status.DeepCopy()
		st.settle(&s, w.clock.Now())
		w.set(pod.UID, st, s, true)
	}
}

// Status returns the status last recorded for uid (what the node believes,
// after SetPodStatus's rules), and false if none is.
func (w *Writer) Status(uid types.UID) (corev1.PodStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.pods[uid]
	if !ok || st.version == 0 {
		return corev1.PodStatus{}, false
	}
	return *st.status.DeepCopy(), true
}

// PodTerminated says the pod's termination finished (kubelet's
// SyncTerminatedPod): none of its containers runs any more. Its status is
// made final: a container not terminated is reported terminated with reason
// ContainerStatusUnknown and exit code 137 and, for a pod that is not
// static, a phase that is not terminal becomes Failed.
//
// For an API pod whose deletion began (deletionTimestamp set), once that
// final status is in the API the writer deletes the pod with grace period 0
// and a UID precondition, kubelet's final delete; after that it writes
// nothing more for it. Static pods and mirror pods are never deleted.
func (w *Writer) PodTerminated(pod *corev1.Pod) {
	if pod == nil || isMirror(pod) {
		return
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state(pod)
	if st.finished {
		return
	}
	st.see(pod)
	var old corev1.PodStatus
	switch {
	case st.version > 0:
		old = *st.status
	case st.api != nil:
		old = st.api.Status
	}
	s := terminated(pod, old, st.static)
	normalize(pod, &s)
	st.settle(&s, now)
	st.terminated = true
	w.set(pod.UID, st, s, true)
}

// RemovePod forgets uid: the pod is gone from every source.
func (w *Writer) RemovePod(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods, uid)
	delete(w.dirty, uid)
	w.retry.Remove(uid)
	w.backoffs.Forget(uid)
}

// wait returns how long until SyncOnce next has work: 0 when a change is
// pending, else until the earliest retry or the next reconcile.
func (w *Writer) wait() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.dirty) > 0 {
		return 0
	}
	next := w.nextReconcile
	if _, due, ok := w.retry.Peek(); ok && due.Before(next) {
		next = due
	}
	return max(0, next.Sub(w.clock.Now()))
}

// SyncOnce writes every pending change and every retry that is due and,
// when ReconcilePeriod has passed since the last reconcile, checks every
// known pod against the API's view (which costs no request for a pod whose
// status is in the API). A pod backing off after a failure waits for its
// retry. It returns how long to wait before the next call (0 when a change
// is pending, else until the earliest retry or the next reconcile) and the
// failures of this round, joined; each failed pod is retried after its
// back-off.
func (w *Writer) SyncOnce(ctx context.Context) (time.Duration, error) {
	w.syncMu.Lock()
	err := w.syncOnce(ctx)
	w.syncMu.Unlock()
	return w.wait(), err
}

func (w *Writer) syncOnce(ctx context.Context) error {
	now := w.clock.Now()

	w.mu.Lock()
	todo := make([]types.UID, 0, len(w.dirty))
	if !now.Before(w.nextReconcile) {
		w.nextReconcile = now.Add(w.reconcile)
		w.backoffs.GC(now)
		for uid := range w.pods {
			todo = append(todo, uid)
		}
		clear(w.dirty)
	} else {
		for uid := range w.dirty {
			todo = append(todo, uid)
		}
		clear(w.dirty)
		for {
			uid, ok := w.retry.PopDue(now)
			if !ok {
				break
			}
			todo = append(todo, uid)
		}
	}
	// A pod backing off waits for its retry; each pod is synced once.
	n := 0
	seen := make(map[types.UID]bool, len(todo))
	for _, uid := range todo {
		if due, ok := w.retry.Due(uid); seen[uid] || ok && due.After(now) {
			continue
		}
		if st := w.pods[uid]; st != nil && st.upToDate() {
			continue // nothing changed since its last sync
		}
		seen[uid] = true
		w.retry.Remove(uid)
		todo[n] = uid
		n++
	}
	todo = todo[:n]
	w.mu.Unlock()

	// Pods are written MaxParallelWrites at a time: a burst of statuses
	// (30 pods starting at once) does not wait for one request after the
	// other.
	var (
		errs  []error
		errMu sync.Mutex
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, w.parallel)
	for _, uid := range todo {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := w.syncPod(ctx, uid); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Run syncs at once, then whenever a status is set, a retry is due or the
// reconcile period passes, until ctx ends; it then returns nil. Failures are
// logged (with the logger from ctx) and retried after their back-off.
func (w *Writer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	return loop.Run(ctx, w.clock, func(ctx context.Context) (time.Duration, error) {
		d, err := w.SyncOnce(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Writing pod statuses failed; retrying after back-off")
		}
		return d, nil
	}, loop.Signal(w.wake))
}

// snapshot is what one sync of one pod works from, copied under w.mu.
type snapshot struct {
	uid                  types.UID
	namespace, name      string
	nodeName             string
	static               bool
	hash                 string
	status               *corev1.PodStatus // read only
	version              uint64
	api                  *corev1.Pod // read only
	deleting, terminated bool
}

// outcome is how one sync of one pod ended.
type outcome int

const (
	synced     outcome = iota // the API has the status (and the pod is deleted if it was due)
	retryLater                // try again after the pod's back-off
	forgetAPI                 // the mirror pod is gone or not ours: look it up again after back-off
	finished                  // deleted, or gone from the API: nothing more to write
)

func (w *Writer) syncPod(ctx context.Context, uid types.UID) error {
	w.mu.Lock()
	st, ok := w.pods[uid]
	if !ok || st.finished || st.version == 0 || st.upToDate() {
		w.mu.Unlock()
		return nil
	}
	st.delayed = false
	snap := snapshot{
		uid: uid, namespace: st.namespace, name: st.name, nodeName: st.nodeName, static: st.static, hash: st.hash,
		status: st.status, version: st.version, api: st.api,
		deleting: st.deleting, terminated: st.terminated,
	}
	w.mu.Unlock()

	if w.podClient == nil {
		w.record(snap, snap.api, synced)
		return nil
	}
	api, out, err := w.write(ctx, snap)
	w.record(snap, api, out)
	return err
}

// write brings the API's copy of the pod (or of its mirror pod) up to the
// node's status and makes the final delete when it is due. It returns the
// pod as the API showed it last.
func (w *Writer) write(ctx context.Context, snap snapshot) (*corev1.Pod, outcome, error) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(snap.namespace, snap.name), "podUID", snap.uid)
	pods := w.podClient(snap.namespace)
	api := snap.api
	if api == nil {
		var out outcome
		var err error
		if api, out, err = w.read(ctx, pods, snap); api == nil {
			return nil, out, err
		}
	}
	for attempt := 0; ; attempt++ {
		want := target(&api.Status, snap.status, w.clock.Now())
		patch, err := statusPatch(api.UID, &api.Status, &want)
		if err != nil {
			return api, retryLater, fmt.Errorf("status: pod %s/%s: %w", snap.namespace, snap.name, err)
		}
		if patch == nil {
			break
		}
		resp, err := pods.Patch(ctx, snap.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		w.metrics.request(verbPatch, err)
		w.metrics.patchBytes.Add(float64(len(patch)))
		if err == nil {
			logger.V(4).Info("Patched pod status", "patch", string(patch))
			api = replyCopy(resp)
			break
		}
		switch {
		case apierrors.IsNotFound(err) && snap.static:
			logger.V(3).Info("Mirror pod is gone; looking it up again later")
			return nil, forgetAPI, nil
		case apierrors.IsNotFound(err):
			logger.V(3).Info("Pod is gone from the API; nothing more to write")
			return nil, finished, nil
		case uidMismatch(err) && attempt == 0:
			// The pod under this name is not the one the patch names: read
			// it again, once.
			var out outcome
			if api, out, err = w.read(ctx, pods, snap); api == nil {
				return nil, out, err
			}
			continue
		}
		return api, retryLater, fmt.Errorf("status: patching status of pod %s/%s: %w", snap.namespace, snap.name, err)
	}

	if snap.static || !snap.terminated || !(snap.deleting || api.DeletionTimestamp != nil) || !terminal(api.Status.Phase) {
		return api, synced, nil
	}
	err := pods.Delete(ctx, snap.name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      metav1.NewUIDPreconditions(string(api.UID)),
	})
	w.metrics.request(verbDelete, err)
	switch {
	case err == nil:
		logger.V(3).Info("Pod terminated and deleted from the API")
		return nil, finished, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		logger.V(3).Info("Pod already deleted or replaced")
		return nil, finished, nil
	}
	return api, retryLater, fmt.Errorf("status: deleting terminated pod %s/%s: %w", snap.namespace, snap.name, err)
}

// replyCopy is what the writer keeps of a pod the API server answered
// with: the metadata it reads and the status, not the spec or the managed
// fields (most of a pod's size), which the reply alone held.
func replyCopy(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp, DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds,
			Annotations: p.Annotations,
		},
		Status: p.Status,
	}
}

// uidMismatch reports whether err refuses a patch because the pod under its
// name has another UID than the patch's precondition: the API server
// answers 422 Invalid on metadata.uid ("field is immutable"); a 409
// Conflict is taken the same way.
func uidMismatch(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var se apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) || se.Status().Details == nil {
		return false
	}
	for _, c := range se.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// read reads the pod the status goes to: a static pod's mirror pod, or the
// API pod itself. A nil pod comes with the outcome to record: forgetAPI when
// a static pod has no mirror pod yet (not an error: mirror pods are made
// elsewhere), finished when the API pod was deleted or replaced, retryLater
// with an error when the read failed.
func (w *Writer) read(ctx context.Context, pods PodClient, snap snapshot) (*corev1.Pod, outcome, error) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(snap.namespace, snap.name), "podUID", snap.uid)
	p, err := w.get(ctx, pods, snap)
	gone := apierrors.IsNotFound(err)
	switch {
	case err != nil && !gone:
		return nil, retryLater, fmt.Errorf("status: reading pod %s/%s: %w", snap.namespace, snap.name, err)
	case snap.static && (gone || !mirrorOf(p, snap.hash)):
		logger.V(4).Info("Static pod has no mirror pod yet; looking again later")
		return nil, forgetAPI, nil
	case !snap.static && (gone || p.UID != snap.uid):
		logger.V(3).Info("Pod was deleted or replaced; nothing more to write")
		return nil, finished, nil
	}
	return replyCopy(p), synced, nil
}

// get reads one pod by name. The Node authorizer lets a node GET only pods
// it knows to be bound to it, and answers Forbidden, not NotFound, for a
// pod that does not exist (a mirror pod not made yet, a pod just deleted),
// so when the node's name is known the pod is read with a LIST of the
// node's pods by name (allowed with the spec.nodeName field selector), and
// a pod missing from it is NotFound.
func (w *Writer) get(ctx context.Context, pods PodClient, snap snapshot) (*corev1.Pod, error) {
	if snap.nodeName == "" {
		p, err := pods.Get(ctx, snap.name, metav1.GetOptions{})
		w.metrics.request(verbGet, err)
		return p, err
	}
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("metadata.name", snap.name),
		fields.OneTermEqualSelector("spec.nodeName", snap.nodeName),
	).String()})
	w.metrics.request(verbList, err)
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.Name == snap.name && p.Spec.NodeName == snap.nodeName {
			return p, nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), snap.name)
}

// record stores what one sync found: the API's copy of the pod, and whether
// the pod is synced, backs off, or is finished.
func (w *Writer) record(snap snapshot, api *corev1.Pod, out outcome) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.pods[snap.uid]
	if !ok {
		return // removed meanwhile
	}
	switch out {
	case finished:
		st.finished, st.api = true, nil
		w.backoffs.Forget(snap.uid)
		w.retry.Remove(snap.uid)
		delete(w.dirty, snap.uid)
		return
	case forgetAPI:
		if st.api != snap.api {
			// SetMirrorPod handed in the mirror pod while this sync
			// looked for it: write to it now.
			w.backoffs.Forget(snap.uid)
			w.dirty[snap.uid] = struct{}{}
			select {
			case w.wake <- struct{}{}:
			default:
			}
			return
		}
		st.api = nil
	default:
		// Keep a newer copy the caller handed in meanwhile, and one of
		// the version written (shared with the caller's, where the reply
		// is the writer's alone).
		switch {
		case api == nil:
		case st.api == snap.api || st.api == nil:
			st.api = api
		case sameVersion(st.api, api):
			api = st.api
		case !newer(st.api.ResourceVersion, api.ResourceVersion):
			st.api = api
		}
	}
	if out == synced {
		st.share()
		w.backoffs.Forget(snap.uid)
		// Only what this sync worked from (or wrote) counts: a status, copy
		// or deletion handed in meanwhile is synced next time.
		if st.api == api && st.version == snap.version && st.deleting == snap.deleting && st.terminated == snap.terminated {
			st.synced = st.current()
		}
		return
	}
	w.retry.Set(snap.uid, now.Add(w.backoffs.Next(snap.uid, now)))
}
