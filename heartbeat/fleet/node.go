package fleet

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

// Node is one node of a fleet: its heartbeat, lease renewer and host, and
// the controls a test uses on it. Its methods are safe for concurrent use.
type Node struct {
	f       *Fleet
	name    string
	idx     int32  // slot in Fleet.nodes
	num     int32  // the number in the name
	flags   uint16 // queued/running/stopped/rerun bits per kind, deleted; under f.mu
	waiters int32  // goroutines waiting for this node's steps to end; under f.mu
	rnd     uint64 // state of the heartbeat's Rand; used under the heartbeat's lock

	nodes   nodeClient
	leases  leaseClient
	host    *nodestatustest.Host
	setter  nodestatus.StatusSetter
	hb      atomic.Pointer[heartbeat.Heartbeat]
	pods    PodStep // nil: no pods
	over    atomic.Pointer[overrides]
	faults  atomic.Pointer[faults]
	lastErr atomic.Pointer[lastErrors]

	registered   atomic.Bool // as of the last status step
	lastRenew    atomic.Int64
	renewals     atomic.Uint64
	leaseErrors  atomic.Uint64
	statusErrors atomic.Uint64
	statusWrites atomic.Uint64
}

const (
	faultStatus = 0
	faultLease  = 1
)

type faults struct{ err [2]error }

type lastErrors struct{ err [nKinds]error }

type overrides struct {
	set   []corev1.NodeCondition
	clear []corev1.NodeConditionType
}

// Name returns the node's name (also its lease's).
func (n *Node) Name() string { return n.name }

// Index returns the node's index in its fleet (Fleet.Node's; with
// Options.Shard, among this shard's nodes).
func (n *Node) Index() int { return int(n.idx) }

// Number returns the number in the node's name (its index without
// Options.Shard).
func (n *Node) Number() int { return int(n.num) }

// Heartbeat returns the node's heartbeat (a new one after Recreate).
func (n *Node) Heartbeat() *heartbeat.Heartbeat { return n.hb.Load() }

// Renewer returns the node's lease renewer, its heartbeat's (a new one after
// Recreate), or nil with a strategy that uses no lease.
func (n *Node) Renewer() *lease.Renewer { return n.hb.Load().Renewer() }

// Host returns the node's host facts, which a test may change (Update, Set,
// SetMissing); call Trigger afterwards to have them reported before the next
// status round.
func (n *Node) Host() *nodestatustest.Host { return n.host }

// Renewals returns the number of successful lease renewals.
func (n *Node) Renewals() uint64 { return n.renewals.Load() }

// StatusWrites returns the number of status writes (patches of nodes/status)
// that succeeded, registration's reconciliation included.
func (n *Node) StatusWrites() uint64 { return n.statusWrites.Load() }

// LastRenewTime returns the renewTime the node last wrote to its lease, or
// the zero time.
func (n *Node) LastRenewTime() time.Time {
	t := n.lastRenew.Load()
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t)
}

// LastErrors returns the last lease and status errors, or nil.
func (n *Node) LastErrors() (leaseErr, statusErr error) {
	if e := n.lastErr.Load(); e != nil {
		return e.err[kindLease], e.err[kindStatus]
	}
	return nil, nil
}

func (n *Node) setLastErr(k kind, err error) {
	for {
		old := n.lastErr.Load()
		nw := &lastErrors{}
		if old != nil {
			*nw = *old
		}
		nw.err[k] = err
		if n.lastErr.CompareAndSwap(old, nw) {
			return
		}
	}
}

// rand is the heartbeat's source of random numbers: splitmix64, seeded per
// node, so that runs repeat.
func (n *Node) rand() float64 {
	n.rnd += 0x9E3779B97F4A7C15
	z := n.rnd
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

func (n *Node) fault(i int) error {
	f := n.faults.Load()
	if f == nil {
		return nil
	}
	return f.err[i]
}

func (n *Node) setFault(i int, err error) {
	for {
		old := n.faults.Load()
		nw := &faults{}
		if old != nil {
			*nw = *old
		}
		nw.err[i] = err
		if nw.err == [2]error{} {
			nw = nil
		}
		if n.faults.CompareAndSwap(old, nw) {
			return
		}
	}
}

// FailStatus makes the node's status writes (patches of nodes/status) fail
// with err before they reach the API; nil makes them succeed again. The
// heartbeat sees the error as it would see the API server's.
func (n *Node) FailStatus(err error) { n.setFault(faultStatus, err) }

// FailLease makes the node's lease creations and updates fail with err
// before they reach the API; nil makes them succeed again. The renewer backs
// off (200ms doubling to 7s) while they fail.
func (n *Node) FailLease(err error) { n.setFault(faultLease, err) }

func (n *Node) stop(k kind) {
	f := n.f
	f.mu.Lock()
	defer f.mu.Unlock()
	n.flags |= stopped(k)
	if f.heap.Remove(taskKey{n.idx, k}) {
		n.flags &^= queued(k)
	}
}

func (n *Node) resume(k kind, now bool) {
	f := n.f
	if k == kindLease && !f.opts.Strategy.UsesLease() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n.flags &^= stopped(k)
	due := f.clock.Now().UnixNano()
	if !now {
		period, salt := f.leasePeriod, uint64(0)
		if k == kindStatus {
			period, salt = f.statusPeriod, 1<<63
		}
		due = nextSlot(due, f.epoch, slot(int(n.idx), salt, period, f.gran), period)
	}
	f.scheduleLocked(n, k, due)
}

// StopLease stops the node's lease renewals; a renewal already running
// finishes. (With a strategy that uses no lease, renewals never run.)
func (n *Node) StopLease() { n.stop(kindLease) }

// ResumeLease resumes lease renewals at the node's next slot (within one
// renew interval): stepping the fake clock by the renew interval then renews
// it once.
func (n *Node) ResumeLease() { n.resume(kindLease, false) }

// StopStatus stops the node's status rounds; one already running finishes.
func (n *Node) StopStatus() { n.stop(kindStatus) }

// ResumeStatus resumes status rounds at the node's next slot.
func (n *Node) ResumeStatus() { n.resume(kindStatus, false) }

// Stop stops both lease renewals and status rounds, as if the node's agent
// died.
func (n *Node) Stop() { n.StopLease(); n.StopStatus() }

// Resume resumes both at their next slots.
func (n *Node) Resume() { n.ResumeLease(); n.ResumeStatus() }

// Trigger makes the node's next status round due now (it runs on the fleet's
// next SyncOnce, or at once under Run), unless status rounds are stopped.
func (n *Node) Trigger() {
	n.hb.Load().Trigger()
	n.resume2(kindStatus)
}

// TriggerPods makes the node's pod step (Options.Pods) due now.
func (n *Node) TriggerPods() { n.resume2(kindPods) }

// Pods returns the node's pod step (Options.Pods), nil without one.
func (n *Node) Pods() PodStep { return n.pods }

// RenewNow makes the node's next lease renewal due now, unless renewals are
// stopped.
func (n *Node) RenewNow() { n.resume2(kindLease) }

func (n *Node) resume2(k kind) {
	f := n.f
	if k == kindLease && !f.opts.Strategy.UsesLease() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scheduleLocked(n, k, f.clock.Now().UnixNano())
}

// AgeLease writes the node's lease with a renewTime age before now on the
// fleet's clock, as if the node had stopped renewing then. Renewals go on
// unless stopped (StopLease first to keep it old); the renewer meets a
// conflict on its next write and re-reads the lease, as it would after
// anyone else's write.
func (n *Node) AgeLease(ctx context.Context, age time.Duration) error {
	leases := n.f.leaseClient
	l, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("fleet: age lease of %q: %w", n.name, err)
	}
	t := n.f.clock.Now().Add(-age)
	l.Spec.RenewTime = &metav1.MicroTime{Time: t}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("fleet: age lease of %q: %w", n.name, err)
	}
	n.lastRenew.Store(t.UnixNano())
	return nil
}

// SetCondition makes the node report c (by type: Ready, MemoryPressure, or
// a type of one's own) until ClearCondition, whatever its status setters
// compute. Times follow kubelet's rules: lastHeartbeatTime every round,
// lastTransitionTime when the status changes. The node's next status round
// is made due now (see Trigger).
func (n *Node) SetCondition(c corev1.NodeCondition) {
	n.editOverrides(func(o *overrides) {
		o.clear = slices.DeleteFunc(o.clear, func(t corev1.NodeConditionType) bool { return t == c.Type })
		i := slices.IndexFunc(o.set, func(s corev1.NodeCondition) bool { return s.Type == c.Type })
		if i < 0 {
			o.set = append(o.set, c)
		} else {
			o.set[i] = c
		}
	})
	n.Trigger()
}

// ClearCondition ends SetCondition for type t: a condition the status
// setters compute (Ready, MemoryPressure, DiskPressure, PIDPressure) goes
// back to what they compute; any other type is removed from the node's
// status. The node's next status round is made due now.
func (n *Node) ClearCondition(t corev1.NodeConditionType) {
	n.editOverrides(func(o *overrides) {
		o.set = slices.DeleteFunc(o.set, func(s corev1.NodeCondition) bool { return s.Type == t })
		if !kubeletCondition(t) && !slices.Contains(o.clear, t) {
			o.clear = append(o.clear, t)
		}
	})
	n.Trigger()
}

func kubeletCondition(t corev1.NodeConditionType) bool {
	switch t {
	case corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure:
		return true
	}
	return false
}

func (n *Node) editOverrides(fn func(o *overrides)) {
	for {
		old := n.over.Load()
		nw := &overrides{}
		if old != nil {
			nw.set = slices.Clone(old.set)
			nw.clear = slices.Clone(old.clear)
		}
		fn(nw)
		if len(nw.set) == 0 && len(nw.clear) == 0 {
			nw = nil
		}
		if n.over.CompareAndSwap(old, nw) {
			return
		}
	}
}

// nodeSetter is a node's status setter: its setters, then its overrides.
type nodeSetter Node

func (s *nodeSetter) SetStatus(ctx context.Context, node *corev1.Node) error {
	n := (*Node)(s)
	ov := n.over.Load()
	if ov == nil {
		return n.setter.SetStatus(ctx, node)
	}
	var prev []corev1.NodeCondition
	for _, c := range node.Status.Conditions {
		if slices.ContainsFunc(ov.set, func(s corev1.NodeCondition) bool { return s.Type == c.Type }) {
			prev = append(prev, c)
		}
	}
	err := n.setter.SetStatus(ctx, node)
	now := metav1.NewTime(n.f.clock.Now())
	for _, c := range ov.set {
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
		if i := slices.IndexFunc(prev, func(p corev1.NodeCondition) bool { return p.Type == c.Type }); i >= 0 && prev[i].Status == c.Status {
			c.LastTransitionTime = prev[i].LastTransitionTime
		}
		if i := slices.IndexFunc(node.Status.Conditions, func(p corev1.NodeCondition) bool { return p.Type == c.Type }); i >= 0 {
			node.Status.Conditions[i] = c
		} else {
			node.Status.Conditions = append(node.Status.Conditions, c)
		}
	}
	if len(ov.clear) > 0 {
		node.Status.Conditions = slices.DeleteFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
			return slices.Contains(ov.clear, c.Type)
		})
	}
	return err
}

// Delete stops the node (as Stop, and its pod step), waits for its running
// steps to end, and deletes its Node and its Lease (a missing one is no
// error). Its pods are left as they are, as a stopped kubelet leaves them;
// Recreate runs its pod step again.
func (n *Node) Delete(ctx context.Context) error {
	f := n.f
	f.mu.Lock()
	n.registered.Store(false)
	n.flags |= flagDeleted | stopped(kindLease) | stopped(kindStatus)
	for k := range kind(nKinds) {
		if f.heap.Remove(taskKey{n.idx, k}) {
			n.flags &^= queued(k)
		}
	}
	n.waiters++
	for n.flags&(running(kindLease)|running(kindStatus)|running(kindPods)) != 0 {
		f.cond.Wait()
	}
	n.waiters--
	f.mu.Unlock()
	err := f.nodeClient.Delete(ctx, n.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("fleet: delete node %q: %w", n.name, err)
	}
	err = f.leaseClient.Delete(ctx, n.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("fleet: delete lease %q: %w", n.name, err)
	}
	return nil
}

// Recreate starts a node again after Delete, as a new agent would: a new
// heartbeat (from the template, called again) registers the Node on the
// fleet's next SyncOnce, and its new renewer creates the lease again. It does
// nothing to a node that was not deleted.
func (n *Node) Recreate() error {
	f := n.f
	f.mu.Lock()
	deleted := n.flags&flagDeleted != 0
	f.mu.Unlock()
	if !deleted {
		return nil
	}
	hb, err := f.newHeartbeat(n, f.opts.Template(int(n.num), n.name))
	if err != nil {
		return err
	}
	n.hb.Store(hb)
	f.mu.Lock()
	defer f.mu.Unlock()
	n.flags &^= flagDeleted | stopped(kindLease) | stopped(kindStatus)
	now := f.clock.Now().UnixNano()
	f.scheduleLocked(n, kindStatus, now)
	f.scheduleLocked(n, kindLease, now)
	if n.pods != nil {
		f.scheduleLocked(n, kindPods, now)
	}
	return nil
}

// Stopped reports whether the node's lease renewals and status rounds are
// stopped, and whether it is deleted.
func (n *Node) Stopped() (lease, status, deleted bool) {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	return n.flags&stopped(kindLease) != 0, n.flags&stopped(kindStatus) != 0, n.flags&flagDeleted != 0
}

func parseIP(s string) net.IP { return net.ParseIP(s) }

var _ nodestatus.StatusSetter = (*nodeSetter)(nil)
