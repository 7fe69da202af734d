package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/randutil"
)

// Defaults and bounds of Options.
const (
	DefaultNamespace        = corev1.NamespaceNodeLease // "kube-node-lease"
	DefaultLeaseDuration    = 40 * time.Second
	DefaultJitter           = 0.04
	DefaultEnsureBackoff    = 200 * time.Millisecond
	DefaultMaxEnsureBackoff = 7 * time.Second
	MinRenewInterval        = 100 * time.Millisecond
	MinLeaseDuration        = time.Second
	MaxLeaseDuration        = time.Hour
	MaxUpdateAttempts       = 5
	// RepeatedFailures is the number of consecutive failed requests after
	// which Options.OnRepeatedFailure is called (and again after each
	// further failure), as kubelet calls its hook from the second failed
	// attempt on.
	RepeatedFailures          = 2
	minBackoff                = 10 * time.Millisecond
	maxJitter                 = 1.0
	nodeOwnerAPIVersion       = "v1"
	nodeOwnerKind             = "Node"
	defaultRequestTimeoutCeil = 10 * time.Second
)

var (
	// ErrUpdateAttempts is wrapped by the error SyncOnce returns when every
	// update attempt of one renewal failed.
	ErrUpdateAttempts = errors.New("lease: all update attempts failed")
	// ErrOwnerUnknown is wrapped by the error SyncOnce returns when the lease
	// must be created but the UID of its Node is not known yet: the lease is
	// never created without its owner reference.
	ErrOwnerUnknown = errors.New("lease: the UID of the owner Node is not known yet")
)

// LeaseClient is the part of a client of coordination.k8s.io/v1 Leases in
// one namespace that the renewer uses. Its methods are those of client-go's
// typed client, so clientset.CoordinationV1().Leases(lease.DefaultNamespace)
// is one, as is a fake clientset's.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// NodeClient is the part of a client of core/v1 Nodes that the renewer uses
// with Options.LookupNodeUID: clientset.CoreV1().Nodes() is one.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
}

// Options configure a Renewer. Zero values take the default named in each
// field's comment.
type Options struct {
	// Leases reads and writes the leases of Namespace:
	// clientset.CoordinationV1().Leases(lease.DefaultNamespace). Required.
	Leases LeaseClient
	// Nodes reads the Node for its UID: clientset.CoreV1().Nodes().
	// Required with LookupNodeUID, unused otherwise.
	Nodes NodeClient
	// NodeName names the lease and the Node that owns it. Required.
	NodeName string
	// HolderIdentity is written to spec.holderIdentity. Default: NodeName.
	HolderIdentity string
	// Namespace of the lease, written to its metadata; Leases must be the
	// client of this namespace. Default: "kube-node-lease".
	Namespace string
	// LeaseDuration is written to spec.leaseDurationSeconds. It must be a
	// whole number of seconds between 1s and 1h. Default: 40s.
	LeaseDuration time.Duration
	// RenewInterval is the time between the end of one renewal and the start
	// of the next. Between 100ms and LeaseDuration. Default: LeaseDuration/4
	// (10s with the default duration).
	RenewInterval time.Duration
	// Jitter is the largest fraction of RenewInterval added at random to each
	// wait, between 0 and 1. Zero means the default 0.04; a negative value
	// turns jitter off.
	Jitter float64
	// EnsureBackoff is the first wait after a failed renewal; it doubles after
	// each further failure up to MaxEnsureBackoff and is reset by a success.
	// Between 10ms and MaxEnsureBackoff. Default: 200ms.
	EnsureBackoff time.Duration
	// MaxEnsureBackoff caps the back-off. Between EnsureBackoff and
	// RenewInterval+LeaseDuration. Default: 7s, or RenewInterval+LeaseDuration
	// when that is shorter (a lease of a few seconds).
	MaxEnsureBackoff time.Duration
	// RequestTimeout bounds one renewal's requests together (wall time, not
	// the injected clock). Zero means min(RenewInterval, 10s); a negative
	// value means no timeout other than ctx's.
	RequestTimeout time.Duration
	// NodeUID is the UID of the Node, when already known. The lease is
	// created only once the UID is known, so that it has its owner reference
	// from its first write, as kubelet's: set NodeUID, call SetOwner once the
	// Node exists (heartbeat does), or set LookupNodeUID.
	NodeUID types.UID
	// LookupNodeUID makes a renewal GET the Node while its UID is unknown:
	// before creating the lease, and after renewing an existing lease that
	// has no owner yet (at most one GET per renewal; a failure is ignored
	// there). Default false: SetOwner is cheaper when the caller registers
	// the Node itself.
	LookupNodeUID bool
	// OnRepeatedFailure, when set, is called after RepeatedFailures (2)
	// consecutive failed requests (conflicts excepted), and after each
	// further one, from inside SyncOnce. kubelet closes its API
	// connections here, so that a dead TCP connection is not reused.
	// Default: none.
	OnRepeatedFailure func()
	// Clock is the source of time. Default: clock.RealClock{}.
	Clock clock.Clock
	// Registerer registers the renewer's metrics; renewers sharing a
	// registerer share the metrics. Nil: no metrics.
	Registerer prometheus.Registerer
	// Rand returns numbers in [0,1) for jitter. Default: math/rand/v2.Float64.
	Rand func() float64
}

// Renewer keeps one node Lease alive. Its methods are safe for concurrent
// use; SyncOnce calls are serialised.
type Renewer struct {
	nodes    NodeClient
	leases   LeaseClient
	name     string
	ns       string
	holder   string
	duration int32
	interval time.Duration
	jitter   float64
	timeout  time.Duration
	lookup   bool
	onFail   func()
	clock    clock.Clock
	rand     func() float64
	metrics  *metrics

	mu       sync.Mutex // serialises SyncOnce
	latest   *coordinationv1.Lease
	now      metav1.MicroTime // renewTime of the write in flight (saves an allocation)
	backoff  backoff.Backoff
	failures int // consecutive failed requests

	published atomic.Pointer[coordinationv1.Lease] // latest, for readers
	uid       atomic.Pointer[types.UID]
	recreated atomic.Uint64
}

// New checks opts, fills in defaults and returns a Renewer. It makes no
// request.
func New(opts Options) (*Renewer, error) {
	if opts.Leases == nil {
		return nil, optcheck.Required("lease: Options.Leases")
	}
	if opts.LookupNodeUID && opts.Nodes == nil {
		return nil, fmt.Errorf("%w with Options.LookupNodeUID", optcheck.Required("lease: Options.Nodes"))
	}
	if opts.NodeName == "" {
		return nil, optcheck.Required("lease: Options.NodeName")
	}
	if opts.HolderIdentity == "" {
		opts.HolderIdentity = opts.NodeName
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if err := optcheck.Range("lease: Options.LeaseDuration", opts.LeaseDuration, MinLeaseDuration, MaxLeaseDuration); err != nil {
		return nil, err
	}
	if opts.LeaseDuration%time.Second != 0 {
		return nil, fmt.Errorf("lease: Options.LeaseDuration %v must be a whole number of seconds", opts.LeaseDuration)
	}
	if opts.RenewInterval == 0 {
		opts.RenewInterval = opts.LeaseDuration / 4
	}
	if err := optcheck.Range("lease: Options.RenewInterval", opts.RenewInterval, MinRenewInterval, opts.LeaseDuration); err != nil {
		return nil, err
	}
	switch {
	case opts.Jitter == 0:
		opts.Jitter = DefaultJitter
	case opts.Jitter < 0:
		opts.Jitter = 0
	case opts.Jitter > maxJitter:
		return nil, optcheck.Range("lease: Options.Jitter", opts.Jitter, 0, maxJitter)
	}
	if opts.EnsureBackoff == 0 {
		opts.EnsureBackoff = DefaultEnsureBackoff
	}
	if opts.MaxEnsureBackoff == 0 {
		opts.MaxEnsureBackoff = max(min(DefaultMaxEnsureBackoff, opts.RenewInterval+opts.LeaseDuration), opts.EnsureBackoff)
	}
	if err := optcheck.Range("lease: Options.MaxEnsureBackoff", opts.MaxEnsureBackoff, minBackoff, opts.RenewInterval+opts.LeaseDuration); err != nil {
		return nil, err
	}
	bo, err := backoff.New("lease: Options.EnsureBackoff", opts.EnsureBackoff, opts.MaxEnsureBackoff, minBackoff)
	if err != nil {
		return nil, err
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = min(opts.RenewInterval, defaultRequestTimeoutCeil)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.Rand = randutil.Or(opts.Rand)
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("lease: Options.Registerer: %w", err)
	}
	r := &Renewer{
		nodes:    opts.Nodes,
		leases:   opts.Leases,
		name:     opts.NodeName,
		ns:       opts.Namespace,
		holder:   opts.HolderIdentity,
		duration: int32(opts.LeaseDuration / time.Second),
		interval: opts.RenewInterval,
		jitter:   opts.Jitter,
		backoff:  bo,
		timeout:  opts.RequestTimeout,
		lookup:   opts.LookupNodeUID,
		onFail:   opts.OnRepeatedFailure,
		clock:    opts.Clock,
		rand:     opts.Rand,
		metrics:  m,
	}
	r.SetOwner(opts.NodeUID)
	return r, nil
}

// SetOwner records the UID of the Node that owns the lease. Until it is
// known the lease is not created. The next renewal writes the owner
// reference (apiVersion v1, kind Node) or moves it to the new UID when the
// Node was recreated. An empty uid is ignored. It makes no request and never
// waits for a renewal.
func (r *Renewer) SetOwner(uid types.UID) {
	if uid == "" {
		return
	}
	r.uid.Store(&uid)
}

func (r *Renewer) owner() types.UID {
	if p := r.uid.Load(); p != nil {
		return *p
	}
	return ""
}

// Recreated returns how many times a renewal found the lease deleted behind
// its back and created it again. In a cluster with a garbage collector the
// lease goes when its owner Node is deleted, so a change is a hint that the
// Node may be gone (package heartbeat then reads the Node).
func (r *Renewer) Recreated() uint64 { return r.recreated.Load() }

// Latest returns a copy of the lease as last written or read, or nil. It
// never waits for a renewal in flight.
func (r *Renewer) Latest() *coordinationv1.Lease {
	if l := r.published.Load(); l != nil {
		return l.DeepCopy()
	}
	return nil
}

// Interval returns the renew interval in force.
func (r *Renewer) Interval() time.Duration { return r.interval }

// Duration returns the lease duration written to the lease.
func (r *Renewer) Duration() time.Duration { return time.Duration(r.duration) * time.Second }

// NodeName returns the name of the lease and of its Node.
func (r *Renewer) NodeName() string { return r.name }

// SyncOnce renews the lease once and returns how long to wait before the
// next renewal: the renew interval plus jitter after a success, the growing
// back-off (200ms doubling to 7s by default) after a failure. The first call
// (and any call after the lease was lost) reads the lease and creates it
// when it is missing and its owner is known; later calls update it from the
// lease last written, with up to 5 immediate attempts: a conflict re-reads
// the lease, and a lease deleted behind the renewer's back is created again
// in the same call. Run is a loop over SyncOnce; a scheduler driving many
// renewers calls it directly.
func (r *Renewer) SyncOnce(ctx context.Context) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.clock.Now()
	rctx := ctx
	if r.timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	err := r.renew(rctx, start)
	r.metrics.observe(r.clock.Since(start), err)
	if err != nil {
		return r.backoff.Next(), err
	}
	r.backoff.Reset()
	if r.lookup && r.owner() == "" {
		r.lookupOwner(rctx)
	}
	if r.jitter > 0 {
		return r.interval + time.Duration(r.rand()*r.jitter*float64(r.interval)), nil
	}
	return r.interval, nil
}

// failed counts a failed request (conflicts are not failures of the
// connection) and calls the repeated-failure hook when due.
func (r *Renewer) failed(err error) {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
		return
	}
	r.failures++
	if r.failures >= RepeatedFailures && r.onFail != nil {
		r.onFail()
	}
}

func (r *Renewer) renew(ctx context.Context, now time.Time) error {
	leases := r.leases
	base := r.latest
	if base == nil {
		got, err := leases.Get(ctx, r.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return r.create(ctx, now)
		case err != nil:
			r.failed(err)
			return fmt.Errorf("lease: get %s/%s: %w", r.ns, r.name, err)
		}
		r.keep(got)
		base = got
	}
	var lastErr error
	for range MaxUpdateAttempts {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lease: renew %s/%s: %w", r.ns, r.name, errors.Join(err, lastErr))
		}
		got, err := leases.Update(ctx, r.desired(base, now), metav1.UpdateOptions{})
		if err == nil {
			r.keep(got)
			return nil
		}
		lastErr = err
		r.failed(err)
		if apierrors.IsNotFound(err) {
			// Deleted behind our back: create it again now.
			r.latest = nil
			r.recreated.Add(1)
			cerr := r.create(ctx, now)
			if cerr == nil || !apierrors.IsAlreadyExists(cerr) {
				return cerr
			}
			lastErr = cerr
		} else if !apierrors.IsConflict(err) {
			continue
		}
		// Conflict (or a racing create): re-read and retry from what is there.
		fresh, gerr := leases.Get(ctx, r.name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			return r.create(ctx, now)
		}
		if gerr != nil {
			r.failed(gerr)
			lastErr = gerr
			continue
		}
		r.keep(fresh)
		base = fresh
	}
	return fmt.Errorf("%w (%d) for %s/%s: %w", ErrUpdateAttempts, MaxUpdateAttempts, r.ns, r.name, lastErr)
}

// create creates the lease, but only with its owner reference: while the
// Node's UID is unknown (and cannot be looked up) it fails with
// ErrOwnerUnknown, as kubelet waits for its Node.
func (r *Renewer) create(ctx context.Context, now time.Time) error {
	if r.owner() == "" && r.lookup {
		r.lookupOwner(ctx)
	}
	if r.owner() == "" {
		return fmt.Errorf("%w: not creating %s/%s", ErrOwnerUnknown, r.ns, r.name)
	}
	got, err := r.leases.Create(ctx, r.desired(nil, now), metav1.CreateOptions{})
	if err != nil {
		r.failed(err)
		return fmt.Errorf("lease: create %s/%s: %w", r.ns, r.name, err)
	}
	r.keep(got)
	return nil
}

// keep stores l as the base of the next update, without its managed fields:
// an update that omits them leaves the server's as they are, so every
// renewal request is smaller and the renewer holds less. A successful
// request resets the count of consecutive failures.
func (r *Renewer) keep(l *coordinationv1.Lease) {
	l.ManagedFields = nil
	r.latest = l
	r.published.Store(l)
	r.failures = 0
}

// desired returns the lease to write: a shallow copy of base (the renewer
// never mutates what it stores) with the fields the renewer owns set.
func (r *Renewer) desired(base *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if base != nil {
		l.ObjectMeta = base.ObjectMeta
		l.Spec = base.Spec
	} else {
		l.Name = r.name
		l.Namespace = r.ns
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != r.holder {
		h := r.holder
		l.Spec.HolderIdentity = &h
	}
	if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != r.duration {
		d := r.duration
		l.Spec.LeaseDurationSeconds = &d
	}
	r.now = metav1.MicroTime{Time: now}
	l.Spec.RenewTime = &r.now
	if uid := r.owner(); uid != "" {
		l.OwnerReferences = withNodeOwner(l.OwnerReferences, r.name, uid)
	}
	return l
}

// withNodeOwner returns refs with exactly one Node owner reference, to name and
// uid, keeping other owners. refs is returned as is when already right.
func withNodeOwner(refs []metav1.OwnerReference, name string, uid types.UID) []metav1.OwnerReference {
	n := 0
	for _, ref := range refs {
		if ref.Kind == nodeOwnerKind && ref.APIVersion == nodeOwnerAPIVersion {
			if ref.UID != uid || ref.Name != name {
				n = -1
				break
			}
			n++
		}
	}
	if n == 1 {
		return refs
	}
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, ref := range refs {
		if ref.Kind != nodeOwnerKind || ref.APIVersion != nodeOwnerAPIVersion {
			out = append(out, ref)
		}
	}
	return append(out, metav1.OwnerReference{APIVersion: nodeOwnerAPIVersion, Kind: nodeOwnerKind, Name: name, UID: uid})
}

func (r *Renewer) lookupOwner(ctx context.Context) {
	node, err := r.nodes.Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Node UID not known yet", "node", r.name, "err", err)
		return
	}
	r.SetOwner(node.UID)
}

// Run renews the lease until ctx ends: a loop over SyncOnce, waiting on the
// injected clock for as long as each step asks. It returns nil when ctx
// ends.
func (r *Renewer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	return loop.Run(ctx, r.clock, func(ctx context.Context) (time.Duration, error) {
		wait, err := r.SyncOnce(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Failed to renew node lease, will retry", "lease", klog.KRef(r.ns, r.name), "backoff", wait)
		}
		return wait, nil
	})
}
