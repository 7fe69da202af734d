package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"

	"github.com/nodekit/nodekit/internal/loop"
)

var (
	// ErrStatusAttempts is wrapped by the error of a status round whose
	// attempts all failed.
	ErrStatusAttempts = errors.New("heartbeat: all node status attempts failed")
	// ErrNodeNotFound is wrapped when the Node is gone. With
	// Options.ReRegister, the next step registers it again.
	ErrNodeNotFound = errors.New("heartbeat: node not found")
)

// Event reasons recorded through Options.Recorder.
const (
	EventNodeReady    = "NodeReady"
	EventNodeNotReady = "NodeNotReady"
)

// Heartbeat registers one Node and keeps the control plane told it is alive.
// SyncOnce is its synchronous step and Run a loop over it; Register,
// SyncStatus, SyncFastStatus and SyncLease are the parts SyncOnce is made
// of, for tests that want one of them alone. Status steps are serialised
// with each other; the lease step runs independently. Readers (Node,
// Registered) never wait for a step.
type Heartbeat struct {
	nodes      NodeClient
	name       string
	template   *lastNode // the Node to register, kept encoded as the last node is
	setter     nodestatus.StatusSetter
	strategy   HeartbeatStrategy
	update     time.Duration
	report     time.Duration
	jitter     float64
	register   bool
	reRegister bool
	watch      bool
	labels     []string
	required   []label // labels re-applied on every round
	fastEvery  time.Duration
	grace      time.Duration
	mode       WriteMode
	manager    string
	timeout    time.Duration
	onFail     func()
	clock      clock.Clock
	recorder   record.EventRecorder
	rand       func() float64
	lease      *lease.Renewer
	metrics    *metrics

	// Published for readers, written under mu.
	view *NodeView
	seen atomic.Pointer[corev1.Node] // the Node as the watch last saw it

	mu          sync.Mutex // serialises the status steps
	lastPost    time.Time  // zero: never posted
	reportDelay time.Duration
	regBackoff  backoff.Backoff
	failures    int                        // consecutive failed status requests
	owned       []corev1.NodeConditionType // condition types applied (ServerSideApply)
	leaseLost   uint64                     // lease.Recreated() as last seen
	nextStatus  time.Time                  // when the next full round is due
	fastActive  bool
	fastUntil   time.Time
	nextFast    time.Time
}

// New checks opts, fills in defaults and returns a Heartbeat. It makes no
// request.
func New(opts Options) (*Heartbeat, error) {
	renewer, err := opts.complete()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: Options.Registerer: %w", err)
	}
	tmpl := opts.Node.DeepCopy()
	tmpl.Name = opts.NodeName
	h := &Heartbeat{
		nodes:      opts.Nodes,
		name:       opts.NodeName,
		setter:     opts.StatusSetter,
		strategy:   opts.Strategy,
		update:     opts.NodeStatusUpdateFrequency,
		report:     opts.NodeStatusReportFrequency,
		jitter:     opts.Jitter,
		register:   !opts.DisableRegistration,
		reRegister: opts.ReRegister,
		watch:      !opts.DisableNodeWatch,
		labels:     opts.ManagedLabels,
		required:   requiredLabels(tmpl),
		fastEvery:  opts.FastStatusInterval,
		grace:      opts.NodeReadyGracePeriod,
		mode:       opts.WriteMode,
		manager:    opts.FieldManager,
		timeout:    opts.RequestTimeout,
		onFail:     opts.OnRepeatedFailure,
		clock:      opts.Clock,
		recorder:   opts.Recorder,
		rand:       opts.Rand,
		metrics:    m,
		regBackoff: backoff.Backoff{Initial: opts.RegisterBackoff, Max: opts.MaxRegisterBackoff},
		view:       opts.View,
		lease:      renewer,
	}
	if h.view == nil {
		h.view = NewNodeView()
	}
	if h.template, err = newLastNode(tmpl); err != nil {
		return nil, err
	}
	return h, nil
}

// Renewer returns the lease renewer New built from Options.LeaseOptions, or
// nil when the strategy uses no lease.
func (h *Heartbeat) Renewer() *lease.Renewer { return h.lease }

// Node returns a copy of the node as last read or written, or nil. It never
// waits for a request in flight.
func (h *Heartbeat) Node() *corev1.Node { return h.view.Node() }

// Registered reports whether the Node is known to exist (registered by this
// heartbeat, or found). It never waits for a request in flight.
func (h *Heartbeat) Registered() bool { return h.view.Registered() }

// View returns where the heartbeat publishes the node (Options.View, or a
// NodeView of its own).
func (h *Heartbeat) View() *NodeView { return h.view }

// SyncLease renews the lease once; it does nothing when the strategy uses no
// lease. It returns the wait before the next renewal.
func (h *Heartbeat) SyncLease(ctx context.Context) (time.Duration, error) {
	if h.lease == nil {
		return 0, nil
	}
	return h.lease.SyncOnce(ctx)
}

func (h *Heartbeat) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.timeout > 0 {
		return context.WithTimeout(ctx, h.timeout)
	}
	return ctx, func() {}
}

// failed counts a failed request and calls the repeated-failure hook from
// the RepeatedFailures-th consecutive one on; a success (nil) resets the
// count. Answers that show the connection works (conflict, not found,
// already exists, forbidden) count as neither.
func (h *Heartbeat) failed(err error) {
	if err == nil {
		h.failures = 0
		return
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
		return
	}
	h.failures++
	if h.failures >= RepeatedFailures && h.onFail != nil {
		h.onFail()
	}
}

// Register makes one attempt at registering the Node: it creates the Node
// from the template with a computed status, or, when it exists already,
// reconciles what the agent owns (managed labels, capacity and allocatable,
// the controller-managed attach/detach annotation) with a patch.
func (h *Heartbeat) Register(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registerLocked(ctx)
}

func (h *Heartbeat) registerLocked(ctx context.Context) error {
	err := h.tryRegister(ctx)
	h.metrics.registration(err)
	return err
}

func (h *Heartbeat) tryRegister(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	initial, err := h.template.get()
	if err != nil {
		return err
	}
	if err := h.setter.SetStatus(ctx, initial); err != nil {
		logger.Info("Status setters failed while building the node to register", "node", h.name, "err", err)
	}
	nodes := h.nodes
	rctx, cancel := h.reqCtx(ctx)
	created, err := nodes.Create(rctx, initial, metav1.CreateOptions{FieldManager: h.manager})
	cancel()
	h.failed(err)
	if err == nil {
		if err := h.adopt(created); err != nil {
			return err
		}
		// The Node was created with its computed status: that was a post,
		// and the next round posts only on a change or when the report is
		// due.
		h.posted(true)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("heartbeat: register node %q: %w", h.name, err)
	}
	rctx, cancel = h.reqCtx(ctx)
	existing, gerr := nodes.Get(rctx, h.name, metav1.GetOptions{})
	cancel()
	h.failed(gerr)
	if gerr != nil {
		return fmt.Errorf("heartbeat: register node %q: %w", h.name, errors.Join(err, gerr))
	}
	existing.ManagedFields = nil
	want := existing.DeepCopy()
	if !h.reconcile(initial, want) {
		return h.adopt(existing)
	}
	patch, perr := strategicPatch(existing, want)
	if perr != nil {
		return fmt.Errorf("heartbeat: register node %q: %w", h.name, perr)
	}
	rctx, cancel = h.reqCtx(ctx)
	patched, perr := nodes.Patch(rctx, h.name, strategicMergePatchType, patch, metav1.PatchOptions{FieldManager: h.manager}, "status")
	cancel()
	h.failed(perr)
	if perr != nil {
		return fmt.Errorf("heartbeat: reconcile existing node %q: %w", h.name, perr)
	}
	return h.adopt(patched)
}

// posted records a successful status post. After a change or the first
// post (shift), the next periodic report moves by a random amount of up to
// half the report frequency, so that the reports of many nodes spread, as
// kubelet's do.
func (h *Heartbeat) posted(shift bool) {
	h.lastPost = h.clock.Now()
	h.reportDelay = 0
	if shift {
		h.reportDelay = time.Duration(float64(h.report) * (h.rand() - 0.5))
	}
}

// keep publishes n as the node last read or written.
func (h *Heartbeat) keep(n *corev1.Node) error {
	l, err := newLastNode(n)
	if err != nil {
		return err
	}
	h.view.node.Store(l)
	return nil
}

// adopt records n as the registered node and tells the lease its owner.
func (h *Heartbeat) adopt(n *corev1.Node) error {
	if last := h.view.node.Load(); last == nil || last.uid != n.UID {
		h.lastPost = time.Time{}
		h.reportDelay = 0
		h.owned = nil
	}
	if err := h.keep(n); err != nil {
		return err
	}
	h.view.setRegistered(true)
	if h.lease != nil {
		h.lease.SetOwner(n.UID)
	}
	return nil
}

// reconcile updates existing with what the agent owns from initial and
// reports whether anything changed.
func (h *Heartbeat) reconcile(initial, existing *corev1.Node) bool {
	changed := false
	for _, k := range h.labels {
		v, ok := initial.Labels[k]
		if !ok {
			continue
		}
		if cur, has := existing.Labels[k]; v == "" {
			if has {
				delete(existing.Labels, k)
				changed = true
			}
		} else if !has || cur != v {
			if existing.Labels == nil {
				existing.Labels = map[string]string{}
			}
			existing.Labels[k] = v
			changed = true
		}
	}
	want, wantSet := initial.Annotations[ControllerManagedAttachAnnotation]
	have, haveSet := existing.Annotations[ControllerManagedAttachAnnotation]
	if want != have || wantSet != haveSet {
		if wantSet {
			if existing.Annotations == nil {
				existing.Annotations = map[string]string{}
			}
			existing.Annotations[ControllerManagedAttachAnnotation] = want
		} else {
			delete(existing.Annotations, ControllerManagedAttachAnnotation)
		}
		changed = true
	}
	changed = reconcileResources(&existing.Status.Capacity, initial.Status.Capacity) || changed
	changed = reconcileResources(&existing.Status.Allocatable, initial.Status.Allocatable) || changed
	return changed
}

func reconcileResources(have *corev1.ResourceList, want corev1.ResourceList) bool {
	changed := false
	for k, q := range want {
		if cur, ok := (*have)[k]; !ok || cur.Cmp(q) != 0 {
			if *have == nil {
				*have = corev1.ResourceList{}
			}
			(*have)[k] = q.DeepCopy()
			changed = true
		}
	}
	return changed
}

// SyncStatus runs one status round: register first if needed; then up to 5
// attempts, the first from the newest node known (as last written, or as
// the watch of the Node last saw it), the others from a fresh GET. Each
// attempt computes the status on a copy, asks the strategy whether to post
// it, and writes it.
func (h *Heartbeat) SyncStatus(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.view.registered.Load() && h.register {
		if err := h.registerLocked(ctx); err != nil {
			return err
		}
	}
	return h.syncStatusLocked(ctx)
}

func (h *Heartbeat) syncStatusLocked(ctx context.Context) error {
	start := h.clock.Now()
	posted, err := h.syncStatus(ctx)
	h.metrics.status(h.clock.Since(start), posted, err)
	return err
}

// base returns the node a first attempt computes from: the newer of the
// node as last written and as the watch last saw it (what others wrote,
// such as the node lifecycle controller's Ready=Unknown, shows there).
func (h *Heartbeat) base() (*corev1.Node, error) {
	last := h.view.node.Load()
	if w := h.seen.Load(); w != nil && (last == nil || (w.UID == last.uid && newerThan(w.ResourceVersion, last.rv))) {
		return w.DeepCopy(), nil
	}
	return last.get()
}

func (h *Heartbeat) syncStatus(ctx context.Context) (posted bool, err error) {
	var lastErr error
	// A lease recreated behind our back hints that the Node was deleted
	// (the garbage collector removes the lease with its owner): read the
	// Node instead of trusting the last known one.
	fresh := false
	if h.lease != nil {
		if n := h.lease.Recreated(); n != h.leaseLost {
			h.leaseLost, fresh = n, true
		}
	}
	for i := range MaxStatusAttempts {
		if err := ctx.Err(); err != nil {
			return false, errors.Join(err, lastErr)
		}
		var base *corev1.Node
		if i == 0 && !fresh {
			if base, err = h.base(); err != nil {
				return false, err
			}
		}
		if base == nil {
			got, err := h.get(ctx)
			if apierrors.IsNotFound(err) {
				return false, h.lost(err)
			}
			if err != nil {
				lastErr = err
				continue
			}
			base = got
		}
		posted, err := h.attempt(ctx, base)
		if err == nil {
			return posted, nil
		}
		lastErr = err
	}
	return false, fmt.Errorf("%w (%d) for node %q: %w", ErrStatusAttempts, MaxStatusAttempts, h.name, lastErr)
}

func (h *Heartbeat) get(ctx context.Context) (*corev1.Node, error) {
	rctx, cancel := h.reqCtx(ctx)
	defer cancel()
	n, err := h.nodes.Get(rctx, h.name, metav1.GetOptions{})
	h.failed(err)
	if err != nil {
		return nil, err
	}
	n.ManagedFields = nil
	if last := h.view.node.Load(); !h.register || (last != nil && last.uid != n.UID) {
		if err := h.adopt(n); err != nil {
			return nil, err
		}
	} else if err := h.keep(n); err != nil {
		return nil, err
	}
	return n.DeepCopy(), nil
}

// lost handles a Node that is gone.
func (h *Heartbeat) lost(err error) error {
	if h.register && h.reRegister {
		h.view.setRegistered(false)
		h.view.node.Store(nil)
	}
	return fmt.Errorf("%w: %q: %w", ErrNodeNotFound, h.name, err)
}

type label struct{ key, value string }

// requiredLabels are the labels of tmpl that kubelet puts back on its Node
// whenever they are missing or changed: kubernetes.io/hostname, os and
// arch (NodeRestriction lets a node set these on itself). A slice, not a
// map: a fleet holds one per node.
func requiredLabels(tmpl *corev1.Node) []label {
	var req []label
	for _, k := range []string{corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable} {
		if v := tmpl.Labels[k]; v != "" {
			req = append(req, label{k, v})
		}
	}
	return req
}

// restoreLabels sets the required labels on n and reports whether any was
// missing or different.
func (h *Heartbeat) restoreLabels(n *corev1.Node) bool {
	changed := false
	for _, l := range h.required {
		if cur, ok := n.Labels[l.key]; ok && cur == l.value {
			continue
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[l.key] = l.value
		changed = true
	}
	return changed
}

// attempt computes the status from base and posts it when the strategy says
// so, or when a required label must be put back. base is not modified.
func (h *Heartbeat) attempt(ctx context.Context, base *corev1.Node) (bool, error) {
	computed := base.DeepCopy()
	if err := h.setter.SetStatus(ctx, computed); err != nil {
		klog.FromContext(ctx).Info("Status setters failed; posting what they computed", "node", h.name, "err", err)
	}
	labels := h.restoreLabels(computed)
	now := h.clock.Now()
	changed := StatusChanged(&base.Status, &computed.Status)
	state := PostState{
		Changed:         changed,
		NeverPosted:     h.lastPost.IsZero(),
		SinceLastPost:   now.Sub(h.lastPost),
		ReportFrequency: h.report + h.reportDelay,
	}
	if !labels && !h.strategy.ShouldPost(state) {
		return false, nil
	}
	updated, err := h.write(ctx, base, computed)
	if err != nil {
		return false, err
	}
	h.posted(changed || state.NeverPosted)
	h.recordReady(base, updated)
	return true, h.keep(updated)
}

func (h *Heartbeat) write(ctx context.Context, base, computed *corev1.Node) (*corev1.Node, error) {
	var (
		body []byte
		err  error
		opts = metav1.PatchOptions{FieldManager: h.manager}
		pt   = strategicMergePatchType
	)
	if h.mode == ServerSideApply {
		h.owned = ownedConditions(h.owned, base.Status.Conditions, computed.Status.Conditions)
		body, err = applyBody(h.name, h.required, &computed.Status, h.owned)
		opts.Force = &forceApply
		pt = applyPatchType
	} else {
		body, err = strategicPatch(base, computed)
	}
	if err != nil {
		return nil, fmt.Errorf("heartbeat: build status write for node %q: %w", h.name, err)
	}
	rctx, cancel := h.reqCtx(ctx)
	defer cancel()
	updated, err := h.nodes.Patch(rctx, h.name, pt, body, opts, "status")
	h.failed(err)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: write status of node %q: %w", h.name, err)
	}
	updated.ManagedFields = nil
	return updated, nil
}

var forceApply = true

func (h *Heartbeat) recordReady(before, after *corev1.Node) {
	if h.recorder == nil {
		return
	}
	was := readyStatus(before)
	now := readyStatus(after)
	if now == "" || now == was {
		return
	}
	reason := EventNodeNotReady
	if now == corev1.ConditionTrue {
		reason = EventNodeReady
	}
	ref := &corev1.ObjectReference{Kind: "Node", Name: h.name, UID: after.UID}
	h.recorder.Eventf(ref, corev1.EventTypeNormal, reason, "Node %s status is now: %s", h.name, reason)
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return n.Status.Conditions[i].Status
		}
	}
	return ""
}

// SyncFastStatus is one start-up fast status check: it computes the status
// from the last known node without reading it, and posts it only when the
// node has just turned Ready. It reports done when the node is Ready (fast
// checks can stop).
func (h *Heartbeat) SyncFastStatus(ctx context.Context) (done bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.syncFast(ctx)
}

func (h *Heartbeat) syncFast(ctx context.Context) (done bool, err error) {
	last := h.view.node.Load()
	if last == nil {
		return false, nil
	}
	if last.ready == corev1.ConditionTrue {
		return true, nil
	}
	base, err := last.get()
	if err != nil {
		return false, err
	}
	computed := base.DeepCopy()
	if err := h.setter.SetStatus(ctx, computed); err != nil {
		klog.FromContext(ctx).V(4).Info("Status setters failed in fast status check", "node", h.name, "err", err)
	}
	if !StatusChanged(&base.Status, &computed.Status) || readyStatus(computed) != corev1.ConditionTrue {
		return false, nil
	}
	h.restoreLabels(computed)
	start := h.clock.Now()
	updated, err := h.write(ctx, base, computed)
	if err == nil {
		h.posted(true)
		h.recordReady(base, updated)
		h.metrics.status(h.clock.Since(start), true, nil)
		return true, h.keep(updated)
	}
	// The node as last known is probably stale: a full round reads it.
	_, err = h.syncStatus(ctx)
	h.metrics.status(h.clock.Since(start), err == nil, err)
	return true, err
}

// Trigger makes the next SyncOnce run a full status round, whatever its
// schedule (for example after a setter learned something new).
func (h *Heartbeat) Trigger() {
	h.mu.Lock()
	h.nextStatus = time.Time{}
	h.mu.Unlock()
}

// SyncOnce is the heartbeat's synchronous step: it does what is due at the
// clock's now and returns how long to wait before the next call. Unless
// registered, it makes one registration attempt and, after a failure,
// returns the back-off (100ms doubling to 7s by default). Once registered,
// it runs a full status round every update frequency (with jitter) and,
// until the node is Ready or NodeReadyGracePeriod has passed since
// registration, a fast status check every FastStatusInterval. A Node
// deleted meanwhile is registered again only with Options.ReRegister. Run is
// a loop over SyncOnce; a scheduler of many nodes calls it directly (it
// may call it earlier than asked: nothing that is not due runs, except a
// status round after Trigger). The lease is renewed separately (SyncLease).
func (h *Heartbeat) SyncOnce(ctx context.Context) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	logger := klog.FromContext(ctx)
	var err error
	if h.register && !h.view.registered.Load() {
		if err := h.registerLocked(ctx); err != nil {
			return h.regBackoff.Next(), err
		}
		h.regBackoff.Reset()
		logger.Info("Registered node", "node", h.name)
		now := h.clock.Now()
		h.nextStatus = now
		if h.grace > 0 {
			h.fastActive, h.fastUntil, h.nextFast = true, now.Add(h.grace), now
		}
	}
	now := h.clock.Now()
	if h.fastActive && !now.Before(h.nextFast) {
		if !now.Before(h.fastUntil) {
			logger.Info("Node did not become ready in time after start-up", "node", h.name, "gracePeriod", h.grace)
			h.fastActive = false
		} else if done, ferr := h.syncFast(ctx); done {
			h.fastActive = false
			err = ferr
		} else {
			h.nextFast = now.Add(h.fastEvery)
		}
	}
	if !now.Before(h.nextStatus) {
		err = errors.Join(err, h.syncStatusLocked(ctx))
		h.nextStatus = h.clock.Now().Add(h.jittered(h.update))
		if h.register && !h.view.registered.Load() {
			return 0, err // the Node is gone: register again at once
		}
	}
	wake := h.nextStatus
	if h.fastActive && h.nextFast.Before(wake) {
		wake = h.nextFast
	}
	return max(0, wake.Sub(h.clock.Now())), err
}

// Run registers the Node, then runs SyncOnce in a loop until ctx ends, and,
// with a lease strategy, the lease's loop (started once the Node is
// registered, so that the lease has its owner from its first write).
// Unless Options.DisableNodeWatch is set, it also watches the own Node (one
// LIST and WATCH with fieldSelector metadata.name=<node>), so that status
// written by others is compared against. It returns nil when ctx ends.
func (h *Heartbeat) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	if h.watch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.watchNode(ctx)
		}()
	}
	leaseStarted := h.lease == nil
	return loop.Run(ctx, h.clock, func(ctx context.Context) (time.Duration, error) {
		wait, err := h.SyncOnce(ctx)
		if ctx.Err() != nil {
			return wait, nil
		}
		if err != nil {
			if h.view.registered.Load() || !h.register {
				logger.Error(err, "Unable to update node status", "node", h.name)
			} else {
				logger.Error(err, "Unable to register node, will retry", "node", h.name, "backoff", wait)
			}
		}
		if !leaseStarted && h.view.registered.Load() {
			leaseStarted = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = h.lease.Run(ctx)
			}()
		}
		return wait, nil
	})
}

func (h *Heartbeat) jittered(d time.Duration) time.Duration {
	if h.jitter <= 0 {
		return d
	}
	return d + time.Duration(h.rand()*h.jitter*float64(d))
}
