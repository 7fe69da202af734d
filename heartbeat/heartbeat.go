package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
)

var (
	// ErrStatusAttempts is wrapped by the error of a status round whose
	// attempts all failed.
	ErrStatusAttempts = errors.New("heartbeat: all node status attempts failed")
	// ErrNodeNotFound is wrapped when the Node is gone. With re-registration
	// on, the next round registers it again.
	ErrNodeNotFound = errors.New("heartbeat: node not found")
)

// Event reasons recorded through Options.EventRecorder.
const (
	EventNodeReady    = "NodeReady"
	EventNodeNotReady = "NodeNotReady"
)

// Heartbeat registers one Node and keeps the control plane told it is alive.
// Register, SyncStatus, SyncFastStatus and SyncLease are the steps Run
// drives; an external scheduler may call them instead of Run. Status steps
// are serialised with each other; the lease step runs independently.
type Heartbeat struct {
	client      kubernetes.Interface
	name        string
	template    lastNode // the Node to register, kept encoded as the last node is
	setter      nodestatus.StatusSetter
	strategy    HeartbeatStrategy
	update      time.Duration
	report      time.Duration
	jitter      float64
	register    bool
	reRegister  bool
	regBackoff0 time.Duration
	regBackoffN time.Duration
	labels      []string
	fastEvery   time.Duration
	grace       time.Duration
	mode        WriteMode
	manager     string
	timeout     time.Duration
	clock       clock.Clock
	recorder    record.EventRecorder
	rand        func() float64
	lease       *lease.Renewer
	metrics     *metrics

	mu          sync.Mutex
	node        lastNode // last known node
	registered  bool
	lastPost    time.Time // zero: never posted
	reportDelay time.Duration
	regBackoff  time.Duration
	owned       []corev1.NodeConditionType // condition types applied (ServerSideApply)
	leaseLost   uint64                     // lease.Recreated() as last seen
}

// New checks opts, fills in defaults and returns a Heartbeat. It makes no
// request.
func New(opts Options) (*Heartbeat, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	tmpl := opts.Node.DeepCopy()
	tmpl.Name = opts.NodeName
	h := &Heartbeat{
		client:      opts.Client,
		name:        opts.NodeName,
		setter:      opts.StatusSetter,
		strategy:    opts.Strategy,
		update:      opts.NodeStatusUpdateFrequency,
		report:      opts.NodeStatusReportFrequency,
		jitter:      opts.Jitter,
		register:    !opts.DisableRegistration,
		reRegister:  !opts.DisableReRegistration,
		regBackoff0: opts.RegisterBackoff,
		regBackoffN: opts.MaxRegisterBackoff,
		labels:      opts.ManagedLabels,
		fastEvery:   opts.FastStatusInterval,
		grace:       opts.NodeReadyGracePeriod,
		mode:        opts.WriteMode,
		manager:     opts.FieldManager,
		timeout:     opts.RequestTimeout,
		clock:       opts.Clock,
		recorder:    opts.EventRecorder,
		rand:        opts.Rand,
		metrics:     m,
	}
	h.template.set(tmpl)
	if opts.Strategy.UsesLease() {
		h.lease = opts.Lease
		if h.lease.NodeName() != h.name {
			return nil, fmt.Errorf("heartbeat: Options.Lease renews the lease of %q, not of %q", h.lease.NodeName(), h.name)
		}
	}
	return h, nil
}

// Lease returns the lease renewer, or nil when the strategy uses none.
func (h *Heartbeat) Lease() *lease.Renewer { return h.lease }

// Node returns a copy of the node as last read or written, or nil.
func (h *Heartbeat) Node() *corev1.Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.node.get()
}

// Registered reports whether the Node is known to exist (registered by this
// heartbeat, or found).
func (h *Heartbeat) Registered() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registered
}

// SyncLease renews the lease once; it does nothing when the strategy uses no
// lease.
func (h *Heartbeat) SyncLease(ctx context.Context) error {
	if h.lease == nil {
		return nil
	}
	return h.lease.SyncOnce(ctx)
}

func (h *Heartbeat) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.timeout > 0 {
		return context.WithTimeout(ctx, h.timeout)
	}
	return ctx, func() {}
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
	initial := h.template.get()
	if err := h.setter.SetStatus(ctx, initial); err != nil {
		logger.Info("Status setters failed while building the node to register", "node", h.name, "err", err)
	}
	nodes := h.client.CoreV1().Nodes()
	rctx, cancel := h.reqCtx(ctx)
	created, err := nodes.Create(rctx, initial, metav1.CreateOptions{FieldManager: h.manager})
	cancel()
	if err == nil {
		h.adopt(created)
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
	if gerr != nil {
		return fmt.Errorf("heartbeat: register node %q: %w", h.name, errors.Join(err, gerr))
	}
	existing.ManagedFields = nil
	want := existing.DeepCopy()
	if !h.reconcile(initial, want) {
		h.adopt(existing)
		return nil
	}
	patch, perr := strategicPatch(existing, want)
	if perr != nil {
		return fmt.Errorf("heartbeat: register node %q: %w", h.name, perr)
	}
	rctx, cancel = h.reqCtx(ctx)
	patched, perr := nodes.Patch(rctx, h.name, strategicMergePatchType, patch, metav1.PatchOptions{FieldManager: h.manager}, "status")
	cancel()
	if perr != nil {
		return fmt.Errorf("heartbeat: reconcile existing node %q: %w", h.name, perr)
	}
	h.adopt(patched)
	return nil
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

// adopt records n as the registered node and tells the lease its owner.
func (h *Heartbeat) adopt(n *corev1.Node) {
	if h.node.empty() || h.node.uid != n.UID {
		h.lastPost = time.Time{}
		h.reportDelay = 0
		h.owned = nil
	}
	h.node.set(n)
	h.registered = true
	if h.lease != nil {
		h.lease.SetOwner(n.UID)
	}
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
// attempts, the first from the last known node and the others from a fresh
// GET. Each attempt computes the status on a copy, asks the strategy whether
// to post it, and writes it.
func (h *Heartbeat) SyncStatus(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.registered && h.register {
		if err := h.registerLocked(ctx); err != nil {
			return err
		}
	}
	start := h.clock.Now()
	posted, err := h.syncStatus(ctx)
	h.metrics.status(h.clock.Since(start), posted, err)
	return err
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
			base = h.node.get()
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
	n, err := h.client.CoreV1().Nodes().Get(rctx, h.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !h.register || (!h.node.empty() && h.node.uid != n.UID) {
		h.adopt(n)
	} else {
		h.node.set(n)
	}
	return n, nil
}

// lost handles a Node that is gone.
func (h *Heartbeat) lost(err error) error {
	if h.register && h.reRegister {
		h.registered = false
		h.node.clear()
	}
	return fmt.Errorf("%w: %q: %w", ErrNodeNotFound, h.name, err)
}

// attempt computes the status from base and posts it when the strategy says
// so. base is not modified.
func (h *Heartbeat) attempt(ctx context.Context, base *corev1.Node) (bool, error) {
	computed := base.DeepCopy()
	if err := h.setter.SetStatus(ctx, computed); err != nil {
		klog.FromContext(ctx).Info("Status setters failed; posting what they computed", "node", h.name, "err", err)
	}
	now := h.clock.Now()
	changed := StatusChanged(&base.Status, &computed.Status)
	state := PostState{
		Changed:         changed,
		NeverPosted:     h.lastPost.IsZero(),
		SinceLastPost:   now.Sub(h.lastPost),
		ReportFrequency: h.report + h.reportDelay,
	}
	if !h.strategy.ShouldPost(state) {
		return false, nil
	}
	updated, err := h.write(ctx, base, computed)
	if err != nil {
		return false, err
	}
	h.posted(changed || state.NeverPosted)
	h.recordReady(base, updated)
	h.node.set(updated)
	return true, nil
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
		body, err = applyBody(h.name, &computed.Status, h.owned)
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
	updated, err := h.client.CoreV1().Nodes().Patch(rctx, h.name, pt, body, opts, "status")
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
	if h.node.empty() {
		return false, nil
	}
	if h.node.ready == corev1.ConditionTrue {
		return true, nil
	}
	base := h.node.get()
	computed := base.DeepCopy()
	if err := h.setter.SetStatus(ctx, computed); err != nil {
		klog.FromContext(ctx).V(4).Info("Status setters failed in fast status check", "node", h.name, "err", err)
	}
	if !StatusChanged(&base.Status, &computed.Status) || readyStatus(computed) != corev1.ConditionTrue {
		return false, nil
	}
	start := h.clock.Now()
	updated, err := h.write(ctx, base, computed)
	if err == nil {
		h.posted(true)
		h.recordReady(base, updated)
		h.node.set(updated)
		h.metrics.status(h.clock.Since(start), true, nil)
		return true, nil
	}
	// The node as last known is probably stale: a full round reads it.
	_, err = h.syncStatus(ctx)
	h.metrics.status(h.clock.Since(start), err == nil, err)
	return true, err
}

// Run registers the Node (back-off 100ms doubling to 7s by default), then
// runs the status loop (every update frequency with jitter, plus the fast
// start-up checks) and, with a lease strategy, the lease loop, until ctx
// ends. A Node deleted meanwhile is registered again. It returns ctx's error.
func (h *Heartbeat) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if h.lease != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.lease.Run(ctx)
		}()
	}
	h.runStatus(ctx)
	wg.Wait()
	return ctx.Err()
}

func (h *Heartbeat) runStatus(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var (
		nextStatus time.Time
		fastActive bool
		fastUntil  time.Time
		nextFast   time.Time
	)
	for ctx.Err() == nil {
		if h.register && !h.Registered() {
			if err := h.Register(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				wait := h.NextRegisterWait(err)
				logger.Error(err, "Unable to register node, will retry", "node", h.name, "backoff", wait)
				if !sleep(ctx, h.clock, wait) {
					return
				}
				continue
			}
			h.NextRegisterWait(nil)
			logger.Info("Registered node", "node", h.name)
			now := h.clock.Now()
			nextStatus = now
			if h.grace > 0 {
				fastActive, fastUntil, nextFast = true, now.Add(h.grace), now
			}
		}
		now := h.clock.Now()
		if fastActive && !now.Before(nextFast) {
			if !now.Before(fastUntil) {
				logger.Info("Node did not become ready in time after start-up", "node", h.name, "gracePeriod", h.grace)
				fastActive = false
			} else if done, err := h.SyncFastStatus(ctx); done {
				fastActive = false
				if err != nil {
					logger.Error(err, "Unable to update node status", "node", h.name)
				}
			} else {
				nextFast = now.Add(h.fastEvery)
			}
		}
		if !now.Before(nextStatus) {
			if err := h.SyncStatus(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "Unable to update node status", "node", h.name)
			}
			nextStatus = h.clock.Now().Add(h.jittered(h.update))
			if h.register && !h.Registered() {
				continue // register again at once, then back off
			}
		}
		wake := nextStatus
		if fastActive && nextFast.Before(wake) {
			wake = nextFast
		}
		if !sleep(ctx, h.clock, wake.Sub(h.clock.Now())) {
			return
		}
	}
}

// NextRegisterWait returns the wait after a registration attempt that ended
// with err (zero after a success, which resets the back-off).
func (h *Heartbeat) NextRegisterWait(err error) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.regBackoff = 0
		return 0
	}
	if h.regBackoff == 0 {
		h.regBackoff = h.regBackoff0
	} else {
		h.regBackoff = min(2*h.regBackoff, h.regBackoffN)
	}
	return h.regBackoff
}

// NextStatusWait returns the wait before the next status round: the update
// frequency plus jitter.
func (h *Heartbeat) NextStatusWait() time.Duration { return h.jittered(h.update) }

func (h *Heartbeat) jittered(d time.Duration) time.Duration {
	if h.jitter <= 0 {
		return d
	}
	return d + time.Duration(h.rand()*h.jitter*float64(d))
}

func sleep(ctx context.Context, c clock.Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
