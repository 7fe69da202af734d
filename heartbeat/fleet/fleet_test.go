package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
)

// TestMain starts the package's control plane (for the integration tests)
// and checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(withControlPlane{m})) }

type withControlPlane struct{ m *testing.M }

func (w withControlPlane) Run() int { return controlplane.Main(w.m, &cp) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFleet(t *testing.T, opts fleet.Options) (*fleet.Fleet, *clocktesting.FakeClock, context.Context) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	if opts.Nodes == nil {
		c := newClientset()
		opts.Nodes, opts.Leases = c.CoreV1().Nodes(), c.CoordinationV1().Leases(lease.DefaultNamespace)
	}
	opts.Clock = clk
	f, err := fleet.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	// Registration at once, then every lease within one renew interval.
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return f, clk, ctx
}

// newClientset is a fake clientset whose objects get UIDs.
func newClientset() *fake.Clientset {
	//lint:ignore SA1019 the field-managed tracker is far too slow for fleets.
	return heartbeattest.UIDClientset(fake.NewSimpleClientset()) //nolint:staticcheck
}

// withClientset returns opts with the nodes' clients taken from c, the
// leases through c's tracker.
func withClientset(opts fleet.Options, c *fake.Clientset) fleet.Options {
	opts.Nodes, opts.Leases = c.CoreV1().Nodes(), heartbeattest.TrackerLeases(c.Tracker(), lease.DefaultNamespace)
	return opts
}

func getLease(t *testing.T, f *fleet.Fleet, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := f.LeaseClient().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func getNode(t *testing.T, f *fleet.Fleet, name string) *corev1.Node {
	t.Helper()
	n, err := f.NodeClient().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func TestStartRegistersEveryNode(t *testing.T) {
	for _, fast := range []bool{false, true} {
		opts := fleet.Options{Count: 20}
		if fast {
			opts = withClientset(opts, newClientset())
		}
		f, clk, _ := newFleet(t, opts)
		s := f.Stats()
		if s.Registered != 20 || s.Renewals != 20 || s.Registrations != 20 || s.LeaseErrors+s.StatusErrors+s.RegisterErrors != 0 {
			t.Fatalf("fast=%v: stats after start %+v", fast, s)
		}
		for i := range 20 {
			n := f.Node(i)
			node := getNode(t, f, n.Name())
			if c := condition(node, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
				t.Fatalf("node %s not Ready: %+v", n.Name(), node.Status.Conditions)
			}
			l := getLease(t, f, n.Name())
			if !l.Spec.RenewTime.Time.Equal(clk.Now()) || *l.Spec.HolderIdentity != n.Name() || *l.Spec.LeaseDurationSeconds != 40 {
				t.Fatalf("lease %s: %+v", n.Name(), l.Spec)
			}
			if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != node.UID || node.UID == "" {
				// The lease is written with the owner once the Node's UID is known: from the first renewal after registration.
				if err := f.Step(context.Background(), 10*time.Second); err != nil {
					t.Fatal(err)
				}
				l = getLease(t, f, n.Name())
				if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != node.UID {
					t.Fatalf("lease %s owner %+v, node UID %q", n.Name(), l.OwnerReferences, node.UID)
				}
			}
		}
	}
}

// Stepping by the renew interval renews every lease exactly once, at the
// clock's time, whatever the step's phase.
func TestStepRenewsEveryLeaseOnce(t *testing.T) {
	f, clk, ctx := newFleet(t, withClientset(fleet.Options{Count: 100}, newClientset()))
	clk.Step(3 * time.Second) // any phase
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := make([]uint64, f.Len())
	for i := range before {
		before[i] = f.Node(i).Renewals()
	}
	for step := 1; step <= 12; step++ {
		if err := f.Step(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		for i := range f.Len() {
			if got := f.Node(i).Renewals() - before[i]; got != uint64(step) {
				t.Fatalf("step %d: node %d renewed %d times, want %d", step, i, got, step)
			}
		}
	}
	_ = clk
}

// Renewals are spread evenly over the renew interval: stepping one second at
// a time renews a tenth of the fleet each time.
func TestRenewalsSpreadEvenly(t *testing.T) {
	f, _, ctx := newFleet(t, withClientset(fleet.Options{Count: 300, StatusUpdateFrequency: time.Hour}, newClientset()))
	prev := f.Stats().Renewals
	for range 30 {
		if err := f.Step(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		s := f.Stats().Renewals
		if d := s - prev; d < 28 || d > 32 {
			t.Fatalf("renewals in one second: %d, want 30±2", d)
		}
		prev = s
	}
}

// With the default granularity every renewal falls on a whole second of the
// schedule (nodes sharing a tick run as a batch); with 1ns the slots are not
// rounded and spread within the seconds.
func TestGranularity(t *testing.T) {
	for _, tc := range []struct {
		gran    time.Duration
		onTicks bool
	}{{0, true}, {time.Nanosecond, false}} {
		f, _, ctx := newFleet(t, withClientset(fleet.Options{Count: 100, Granularity: tc.gran, StatusUpdateFrequency: time.Hour}, newClientset()))
		for range 100 { // the next renew interval, 100ms at a time
			if err := f.Step(ctx, 100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		whole := 0
		for i := range f.Len() {
			if d := f.Node(i).LastRenewTime().Sub(t0); d%time.Second == 0 {
				whole++
			}
		}
		if tc.onTicks && whole != f.Len() || !tc.onTicks && whole > f.Len()/5 {
			t.Errorf("granularity %v: %d of %d renewals on whole seconds", tc.gran, whole, f.Len())
		}
	}
}

func TestStopResume(t *testing.T) {
	f, clk, ctx := newFleet(t, fleet.Options{Count: 10})
	n := f.Node(3)
	n.StopLease()
	last := getLease(t, f, n.Name()).Spec.RenewTime.Time
	if err := f.Step(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := getLease(t, f, n.Name()).Spec.RenewTime.Time; !got.Equal(last) {
		t.Fatalf("stopped lease renewed at %v", got)
	}
	if got := f.Node(4).Renewals(); got != 7 {
		t.Fatalf("running node renewed %d times, want 7", got)
	}
	fresh, running, oldest := f.Freshness(40 * time.Second)
	if fresh != 9 || running != 9 || oldest > 10*time.Second {
		t.Fatalf("Freshness = %d, %d, %v", fresh, running, oldest)
	}
	n.ResumeLease()
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := n.Renewals(); got != 2 {
		t.Fatalf("resumed node renewed %d times, want 2", got)
	}
	if got := getLease(t, f, n.Name()).Spec.RenewTime.Time; !got.Equal(clk.Now()) {
		t.Fatalf("resumed lease renewTime %v, want %v", got, clk.Now())
	}

	// Status rounds stop and resume independently of the lease.
	n.StopStatus()
	n.SetCondition(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "Test"})
	if err := f.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := condition(getNode(t, f, n.Name()), corev1.NodeReady); c.Status != corev1.ConditionTrue {
		t.Fatalf("stopped status posted: %+v", c)
	}
	if got := n.Renewals(); got != 5 {
		t.Fatalf("lease renewals with status stopped: %d, want 5", got)
	}
	n.ResumeStatus()
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := condition(getNode(t, f, n.Name()), corev1.NodeReady); c.Status != corev1.ConditionFalse {
		t.Fatalf("resumed status not posted: %+v", c)
	}
	if l, s, d := n.Stopped(); l || s || d {
		t.Fatalf("Stopped() = %v %v %v", l, s, d)
	}
}

func TestFailStatusAndLease(t *testing.T) {
	f, _, ctx := newFleet(t, fleet.Options{Count: 3})
	n := f.Node(1)
	boom := apierrors.NewServiceUnavailable("injected")
	n.FailStatus(boom)
	n.SetCondition(corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue, Reason: "Test"})
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if c := condition(getNode(t, f, n.Name()), corev1.NodeMemoryPressure); c.Status != corev1.ConditionFalse {
		t.Fatalf("failing status write reached the API: %+v", c)
	}
	_, serr := n.LastErrors()
	if !errors.Is(serr, boom) || f.Stats().StatusErrors != 1 {
		t.Fatalf("status error %v, stats %+v", serr, f.Stats())
	}
	n.FailStatus(nil)
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := condition(getNode(t, f, n.Name()), corev1.NodeMemoryPressure); c.Status != corev1.ConditionTrue {
		t.Fatalf("status not posted after the fault cleared: %+v", c)
	}

	n.FailLease(boom)
	if err := f.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	lerr, _ := n.LastErrors()
	if !errors.Is(lerr, boom) || n.Renewals() != 2 || f.Stats().LeaseErrors == 0 {
		t.Fatalf("lease error %v, renewals %d, stats %+v", lerr, n.Renewals(), f.Stats())
	}
	n.FailLease(nil)
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n.Renewals() != 3 {
		t.Fatalf("renewals after the fault cleared: %d", n.Renewals())
	}
}

func TestAgeLease(t *testing.T) {
	f, clk, ctx := newFleet(t, fleet.Options{Count: 2})
	n := f.Node(0)
	n.StopLease()
	if err := n.AgeLease(ctx, 45*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := getLease(t, f, n.Name()).Spec.RenewTime.Time; !got.Equal(clk.Now().Add(-45 * time.Second)) {
		t.Fatalf("aged renewTime %v", got)
	}
	if fresh, _, oldest := f.Freshness(40 * time.Second); fresh != 0 || oldest != 0 {
		// Node 0 is stopped, so only node 1 counts.
		if fresh != 1 {
			t.Fatalf("Freshness: fresh %d oldest %v", fresh, oldest)
		}
	}
	// Renewing again after someone else's write: the renewer meets a
	// conflict or re-reads, and writes a fresh renewTime.
	n.ResumeLease()
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := getLease(t, f, n.Name()).Spec.RenewTime.Time; !got.Equal(clk.Now()) {
		t.Fatalf("renewTime after resume %v, want %v", got, clk.Now())
	}
}

func TestConditions(t *testing.T) {
	f, clk, ctx := newFleet(t, fleet.Options{Count: 2})
	n := f.Node(0)
	custom := corev1.NodeConditionType("example.com/GPUHealthy")

	n.SetCondition(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "Test", Message: "made not ready"})
	n.SetCondition(corev1.NodeCondition{Type: custom, Status: corev1.ConditionTrue, Reason: "Probe"})
	if err := f.SyncOnce(ctx); err != nil { // runs the kicked status round
		t.Fatal(err)
	}
	if _, err := f.WaitNode(ctx, n.Name(), fleet.ConditionIs(corev1.NodeReady, corev1.ConditionFalse)); err != nil {
		t.Fatal(err)
	}
	node := getNode(t, f, n.Name())
	ready := condition(node, corev1.NodeReady)
	if ready.Message != "made not ready" || !ready.LastTransitionTime.Time.Equal(clk.Now()) {
		t.Fatalf("Ready %+v", ready)
	}
	if c := condition(node, custom); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("custom condition %+v", c)
	}
	transition := ready.LastTransitionTime
	// Unchanged overrides keep their transition time, and are not posted
	// again each round.
	writes := n.StatusWrites()
	if err := f.Step(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n.StatusWrites() != writes {
		t.Fatalf("unchanged status posted %d times", n.StatusWrites()-writes)
	}
	n.ClearCondition(custom)
	n.ClearCondition(corev1.NodeReady)
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	node = getNode(t, f, n.Name())
	if c := condition(node, custom); c != nil {
		t.Fatalf("cleared custom condition still there: %+v", c)
	}
	if c := condition(node, corev1.NodeReady); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.After(transition.Time) {
		t.Fatalf("Ready after clearing: %+v", c)
	}

	// Host facts drive the default setters: low memory is MemoryPressure.
	n.Host().Update(func(h *nodestatus.HostFacts) { h.MemoryAvailable = 50 << 20 })
	n.Trigger()
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if c := condition(getNode(t, f, n.Name()), corev1.NodeMemoryPressure); c.Status != corev1.ConditionTrue {
		t.Fatalf("MemoryPressure %+v", c)
	}
}

func TestWaitTimesOut(t *testing.T) {
	f, _, ctx := newFleet(t, fleet.Options{Count: 1})
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := f.WaitNode(wctx, f.Node(0).Name(), fleet.ConditionIs(corev1.NodeReady, corev1.ConditionFalse))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Ready=True") {
		t.Fatalf("WaitNode error %v", err)
	}
	if err := f.Node(0).WaitRenewals(wctx, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRenewals error %v", err)
	}
}

func TestDeleteRecreate(t *testing.T) {
	f, _, ctx := newFleet(t, fleet.Options{Count: 3})
	n := f.Node(2)
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	oldUID := getNode(t, f, n.Name()).UID
	if err := n.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitNode(ctx, n.Name(), fleet.NodeGone); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitLease(ctx, n.Name(), func(l *coordinationv1.Lease) bool { return l == nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, deleted := n.Stopped(); !deleted {
		t.Fatal("not marked deleted")
	}
	if err := n.Recreate(); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	node := getNode(t, f, n.Name())
	if node.UID == oldUID || node.UID == "" {
		t.Fatalf("recreated node UID %q (old %q)", node.UID, oldUID)
	}
	if err := f.Step(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	l := getLease(t, f, n.Name())
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != node.UID {
		t.Fatalf("recreated lease owner %+v, want UID %q", l.OwnerReferences, node.UID)
	}
}

func TestTemplate(t *testing.T) {
	gpu := corev1.ResourceName("example.com/gpu")
	f, _, _ := newFleet(t, fleet.Options{
		Count:      2,
		NamePrefix: "sim-",
		Template: func(i int, name string) *corev1.Node {
			n := fleet.DefaultTemplate(i, name)
			n.Labels["pool"] = []string{"a", "b"}[i%2]
			n.Spec.Taints = []corev1.Taint{{Key: "example.com/sim", Effect: corev1.TaintEffectNoSchedule}}
			n.Status.Capacity = fleet.Capacity("32", "256Gi", 110)
			n.Status.Capacity[gpu] = resource.MustParse("2")
			n.Status.Allocatable = corev1.ResourceList{gpu: resource.MustParse("2")}
			n.Status.Addresses = []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "192.0.2." + []string{"10", "11"}[i]},
				{Type: corev1.NodeHostName, Address: name + ".example"},
			}
			return n
		},
	})
	if f.NodeByName("sim-1") != f.Node(1) || f.NodeByName("node-0") != nil {
		t.Fatal("NodeByName")
	}
	node := getNode(t, f, "sim-1")
	c := node.Status.Capacity
	if c.Cpu().String() != "32" || c.Memory().String() != "256Gi" || c.Pods().String() != "110" {
		t.Fatalf("capacity %v", c)
	}
	if q := c[gpu]; q.String() != "2" {
		t.Fatalf("extended resource capacity %v", c)
	}
	if q := node.Status.Allocatable[gpu]; q.String() != "2" {
		t.Fatalf("extended resource allocatable %v", node.Status.Allocatable)
	}
	if node.Labels["pool"] != "b" || len(node.Spec.Taints) != 1 {
		t.Fatalf("labels %v taints %v", node.Labels, node.Spec.Taints)
	}
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.11"}, {Type: corev1.NodeHostName, Address: "sim-1.example"}}
	if len(node.Status.Addresses) != 2 || node.Status.Addresses[0] != want[0] || node.Status.Addresses[1] != want[1] {
		t.Fatalf("addresses %v", node.Status.Addresses)
	}
}

// hangingLeases makes the next lease update of one node hang until
// released, as a request to a server that does not answer.
type hangingLeases struct {
	fleet.LeaseClient
	name    string
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *hangingLeases) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if l.Name == h.name && h.armed.CompareAndSwap(true, false) {
		close(h.entered)
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.LeaseClient.Update(ctx, l, opts)
}

// A step that hangs holds up its own worker only: the steps that fall due
// while it hangs run on the other workers, within the same SyncOnce.
func TestHangingStepHoldsUpOnlyItsWorker(t *testing.T) {
	c := newClientset()
	leases := &hangingLeases{LeaseClient: heartbeattest.TrackerLeases(c.Tracker(), lease.DefaultNamespace), name: "node-0",
		entered: make(chan struct{}), release: make(chan struct{})}
	f, clk, ctx := newFleet(t, fleet.Options{Count: 3, Workers: 2, Nodes: c.CoreV1().Nodes(), Leases: leases})
	leases.armed.Store(true)
	clk.Step(10 * time.Second)
	done := make(chan error, 1)
	go func() { done <- f.SyncOnce(ctx) }()
	<-leases.entered
	for round := uint64(2); round <= 3; round++ {
		for i := 1; i < 3; i++ {
			if err := f.Node(i).WaitRenewals(ctx, round); err != nil {
				t.Fatalf("round %d, while node-0's renewal hangs: %v", round, err)
			}
		}
		if round == 2 {
			clk.Step(10 * time.Second) // the next renewals fall due
		}
	}
	if f.Node(0).Renewals() != 1 {
		t.Fatalf("node-0 renewed %d times while its renewal hung", f.Node(0).Renewals())
	}
	close(leases.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.Node(0).Renewals(); n != 2 {
		t.Fatalf("node-0 renewed %d times, want 2", n)
	}
	if s := f.Stats(); s.LeaseErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f, err := fleet.New(withClientset(fleet.Options{Count: 50, Clock: clk, Workers: 4}, newClientset()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	if err := f.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Run(ctx); err == nil {
		t.Fatal("second Run did not fail")
	}
	// Under Run, moving the clock is enough; SyncOnce alongside waits for
	// what fell due.
	for range 4 {
		clk.Step(10 * time.Second)
		if err := f.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.WaitRenewals(ctx, 200); err != nil {
		t.Fatal(err)
	}
	f.Node(7).SetCondition(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "Test"})
	if _, err := f.WaitNode(ctx, f.Node(7).Name(), fleet.ConditionIs(corev1.NodeReady, corev1.ConditionFalse)); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if s := f.Stats(); s.Renewals != 200 || s.LeaseErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestOptionsErrors(t *testing.T) {
	c := newClientset()
	nodes, leases := c.CoreV1().Nodes(), c.CoordinationV1().Leases(lease.DefaultNamespace)
	for _, tc := range []struct {
		opts  fleet.Options
		field string
	}{
		{fleet.Options{Leases: leases, Count: 1}, "Nodes"},
		{fleet.Options{Nodes: nodes, Count: 1}, "Leases"},
		{fleet.Options{Nodes: nodes, Leases: leases}, "Count"},
		{fleet.Options{Nodes: nodes, Leases: leases, Count: 1, LeaseDuration: 1500 * time.Millisecond}, "LeaseDuration"},
		{fleet.Options{Nodes: nodes, Leases: leases, Count: 1, RenewInterval: time.Minute}, "RenewInterval"},
		{fleet.Options{Nodes: nodes, Leases: leases, Count: 1, StatusUpdateFrequency: time.Millisecond}, "StatusUpdateFrequency"},
		{fleet.Options{Nodes: nodes, Leases: leases, Count: 1, StatusReportFrequency: 48 * time.Hour}, "StatusReportFrequency"},
		{fleet.Options{Nodes: nodes, Leases: leases, Count: 1, Workers: -1}, "Workers"},
		{fleet.Options{Nodes: nodes, Leases: leases, Count: 1, Granularity: time.Minute}, "Granularity"},
		{fleet.Options{Nodes: nodes, Leases: leases, Count: 2, Template: func(int, string) *corev1.Node {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "same"}}
		}}, "Node.Name"},
	} {
		_, err := fleet.New(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New with bad %s: %v", tc.field, err)
		}
	}
	f, err := fleet.New(fleet.Options{Nodes: nodes, Leases: leases, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Step(context.Background(), time.Second); err == nil {
		t.Error("Step on the real clock did not fail")
	}
}

func TestStatusOnlyStrategy(t *testing.T) {
	f, _, ctx := newFleet(t, fleet.Options{Count: 3, Strategy: heartbeat.StatusOnlyStrategy()})
	if err := f.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	f.Node(0).ResumeLease()
	f.Node(0).RenewNow()
	if err := f.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if s := f.Stats(); s.Renewals != 0 || s.StatusRounds != 15 {
		t.Fatalf("stats %+v", s)
	}
	// StatusOnly posts every round: one post at registration and one per
	// round after it.
	if w := f.Node(1).StatusWrites(); w != 5 {
		t.Fatalf("status writes %d, want 5", w)
	}
	if _, err := f.LeaseClient().Get(ctx, f.Node(0).Name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease exists: %v", err)
	}
}

// Three shards of one fleet hold every node once, by a stable hash of its
// name, and keep the numbers in the names.
func TestShards(t *testing.T) {
	const count = 300
	seen := map[string]int{}
	for i := range 3 {
		sh, err := fleet.ParseShard(fmt.Sprintf("%d/3", i))
		if err != nil {
			t.Fatal(err)
		}
		cs := heartbeattest.UIDClientset(fake.NewClientset())
		f, err := fleet.New(fleet.Options{Count: count, Shard: sh, Nodes: cs.CoreV1().Nodes(),
			Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace)})
		if err != nil {
			t.Fatal(err)
		}
		if f.Len() < count/3-40 || f.Len() > count/3+40 {
			t.Errorf("shard %d holds %d of %d nodes", i, f.Len(), count)
		}
		for j := range f.Len() {
			n := f.Node(j)
			if n.Index() != j || n.Name() != fmt.Sprint("node-", n.Number()) || !sh.Has(n.Name()) {
				t.Errorf("shard %d node %d: index %d name %s number %d", i, j, n.Index(), n.Name(), n.Number())
			}
			seen[n.Name()]++
		}
	}
	if len(seen) != count {
		t.Errorf("%d nodes in all shards, want %d", len(seen), count)
	}
	for name, k := range seen {
		if k != 1 {
			t.Errorf("%s in %d shards", name, k)
		}
	}
	for _, bad := range []string{"3/3", "-1/2", "1", "a/b", "0/0"} {
		if _, err := fleet.ParseShard(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseShard(%q): %v", bad, err)
		}
	}
}
