package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/lease"

	"github.com/nodekit/nodekit/internal/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var leaseGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func newRenewer(t *testing.T, cs *fake.Clientset, fc *clocktesting.FakeClock, mod func(*lease.Options)) *lease.Renewer {
	t.Helper()
	o := lease.Options{Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: cs.CoreV1().Nodes(), NodeName: "n1", Clock: fc, Jitter: -1, NodeUID: "uid-0"}
	if mod != nil {
		mod(&o)
	}
	r, err := lease.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// count returns how many actions of verb on resource the clientset saw.
func count(cs *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func verbs(cs *fake.Clientset) string {
	var v []string
	for _, a := range cs.Actions() {
		v = append(v, a.GetVerb())
	}
	return strings.Join(v, ",")
}

func getLease(t *testing.T, cs *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.Tracker().Get(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, "kube-node-lease", "n1")
	if err != nil {
		t.Fatal(err)
	}
	return l.(*coordinationv1.Lease)
}

func TestFirstSyncCreatesThenUpdatesWithoutGet(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(t0)
	r := newRenewer(t, cs, fc, nil)
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	l := getLease(t, cs)
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("created lease spec = %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "uid-0" {
		t.Fatalf("owner references of the created lease: %v", l.OwnerReferences)
	}
	for i := 1; i <= 3; i++ {
		fc.Step(10 * time.Second)
		if _, err := r.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if got := getLease(t, cs).Spec.RenewTime.Time; !got.Equal(t0.Add(time.Duration(i) * 10 * time.Second)) {
			t.Fatalf("renewal %d: renewTime %v", i, got)
		}
	}
	if got, want := verbs(cs), "get,create,update,update,update"; got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}

func TestExistingLeaseIsAdoptedAndRenewed(t *testing.T) {
	old := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease"}}
	cs := fake.NewClientset(old)
	fc := clocktesting.NewFakeClock(t0)
	r := newRenewer(t, cs, fc, func(o *lease.Options) { o.HolderIdentity = "agent-x"; o.LeaseDuration = 20 * time.Second })
	if _, err := r.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := getLease(t, cs)
	if *l.Spec.HolderIdentity != "agent-x" || *l.Spec.LeaseDurationSeconds != 20 || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("lease spec = %+v", l.Spec)
	}
	if got, want := verbs(cs), "get,update"; got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
	if r.Interval() != 5*time.Second {
		t.Fatalf("interval %v, want a quarter of 20s", r.Interval())
	}
}

func TestOwnerReferenceAddedLaterAndFollowsNewUID(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(t0)
	r := newRenewer(t, cs, fc, nil)
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	r.SetOwner("uid-1")
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	refs := getLease(t, cs).OwnerReferences
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-1"}
	if len(refs) != 1 || refs[0] != want {
		t.Fatalf("owner references %v, want [%v]", refs, want)
	}
	r.SetOwner("uid-2")
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	refs = getLease(t, cs).OwnerReferences
	if len(refs) != 1 || refs[0].UID != "uid-2" {
		t.Fatalf("owner references %v, want one to uid-2", refs)
	}
}

func TestNodeUIDKnownAtStartAndLookup(t *testing.T) {
	cs := fake.NewClientset()
	r := newRenewer(t, cs, clocktesting.NewFakeClock(t0), func(o *lease.Options) { o.NodeUID = "u0" })
	if _, err := r.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refs := getLease(t, cs).OwnerReferences; len(refs) != 1 || refs[0].UID != "u0" {
		t.Fatalf("owner references %v", refs)
	}

	// LookupNodeUID: the Node appears late; the lease is created once the
	// Node is seen, with its owner reference.
	cs = fake.NewClientset()
	r = newRenewer(t, cs, clocktesting.NewFakeClock(t0), func(o *lease.Options) { o.LookupNodeUID = true; o.NodeUID = "" })
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); !errors.Is(err, lease.ErrOwnerUnknown) {
		t.Fatalf("renewal before the Node exists: %v, want ErrOwnerUnknown", err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "late"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SyncOnce(ctx); err != nil { // learns the UID, creates
		t.Fatal(err)
	}
	if refs := getLease(t, cs).OwnerReferences; len(refs) != 1 || refs[0].UID != "late" {
		t.Fatalf("owner references %v", refs)
	}
	if n := count(cs, "get", "nodes"); n != 2 {
		t.Fatalf("%d node GETs, want 2 (one per renewal while the UID was unknown)", n)
	}
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(cs, "get", "nodes"); n != 2 {
		t.Fatalf("%d node GETs once the UID is known, want still 2", n)
	}
}

func TestConflictRereadsAndRetries(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(t0)
	r := newRenewer(t, cs, fc, nil)
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	conflicts := 2
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(leaseGR, "n1", errors.New("stale"))
		}
		return false, nil, nil
	})
	cs.ClearActions()
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := verbs(cs), "update,get,update,get,update"; got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}

func TestAllAttemptsFail(t *testing.T) {
	cs := fake.NewClientset()
	r := newRenewer(t, cs, clocktesting.NewFakeClock(t0), nil)
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	boom := apierrors.NewServiceUnavailable("down")
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	cs.ClearActions()
	_, err := r.SyncOnce(ctx)
	if !errors.Is(err, lease.ErrUpdateAttempts) || !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("error %v, want ErrUpdateAttempts wrapping the API error", err)
	}
	if n := count(cs, "update", "leases"); n != lease.MaxUpdateAttempts {
		t.Fatalf("%d updates, want %d", n, lease.MaxUpdateAttempts)
	}
}

func TestDeletedLeaseIsRecreatedInSameRenewal(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(t0)
	r := newRenewer(t, cs, fc, func(o *lease.Options) { o.NodeUID = "u1" })
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	fc.Step(10 * time.Second)
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := verbs(cs), "update,create"; got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
	l := getLease(t, cs)
	if !l.Spec.RenewTime.Time.Equal(fc.Now()) || len(l.OwnerReferences) != 1 {
		t.Fatalf("recreated lease %+v", l)
	}
}

func TestOptionValidation(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct {
		name  string
		mod   func(*lease.Options)
		field string
	}{
		{"no leases client", func(o *lease.Options) { o.Leases = nil }, "Leases"},
		{"no nodes client to look up", func(o *lease.Options) { o.Nodes = nil; o.LookupNodeUID = true }, "Nodes"},
		{"no node", func(o *lease.Options) { o.NodeName = "" }, "NodeName"},
		{"10ns interval", func(o *lease.Options) { o.RenewInterval = 10 }, "RenewInterval"},
		{"interval over duration", func(o *lease.Options) { o.RenewInterval = time.Minute }, "RenewInterval"},
		{"fractional duration", func(o *lease.Options) { o.LeaseDuration = 1500 * time.Millisecond }, "LeaseDuration"},
		{"huge duration", func(o *lease.Options) { o.LeaseDuration = 2 * time.Hour }, "LeaseDuration"},
		{"jitter", func(o *lease.Options) { o.Jitter = 2 }, "Jitter"},
		{"backoff", func(o *lease.Options) { o.EnsureBackoff = time.Millisecond }, "EnsureBackoff"},
		{"backoff over max", func(o *lease.Options) { o.EnsureBackoff = 8 * time.Second; o.MaxEnsureBackoff = 7 * time.Second }, "EnsureBackoff"},
		{"max backoff", func(o *lease.Options) { o.MaxEnsureBackoff = time.Hour }, "MaxEnsureBackoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := lease.Options{Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: cs.CoreV1().Nodes(), NodeName: "n1"}
			tc.mod(&o)
			_, err := lease.New(o)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	r, err := lease.New(lease.Options{Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: cs.CoreV1().Nodes(), NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Interval() != 10*time.Second || r.Duration() != 40*time.Second {
		t.Fatalf("defaults: interval %v duration %v", r.Interval(), r.Duration())
	}
}

func TestSyncOnceWaitJitterAndBackoff(t *testing.T) {
	cs := fake.NewClientset()
	r := newRenewer(t, cs, clocktesting.NewFakeClock(t0), func(o *lease.Options) { o.Jitter = 0; o.Rand = func() float64 { return 0.5 } })
	ctx := context.Background()
	if got, err := r.SyncOnce(ctx); err != nil || got != 10*time.Second+200*time.Millisecond {
		t.Fatalf("wait after success %v (%v), want 10.2s (10s + 0.5*0.04*10s)", got, err)
	}
	failing := true
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing {
			return true, nil, errors.New("x")
		}
		return false, nil, nil
	})
	var got []time.Duration
	for range 8 {
		w, err := r.SyncOnce(ctx)
		if err == nil {
			t.Fatal("renewal succeeded")
		}
		got = append(got, w)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 7 * time.Second, 7 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("back-off %v, want %v", got, want)
		}
	}
	failing = false
	_, _ = r.SyncOnce(ctx)
	failing = true
	if w, _ := r.SyncOnce(ctx); w != 200*time.Millisecond {
		t.Fatalf("wait %v after a success and a failure: a success does not reset the back-off", w)
	}
}

// The lease is never created without its owner reference: while the Node's
// UID is unknown a renewal fails with ErrOwnerUnknown and creates nothing.
func TestLeaseNotCreatedBeforeOwnerKnown(t *testing.T) {
	cs := fake.NewClientset()
	r := newRenewer(t, cs, clocktesting.NewFakeClock(t0), func(o *lease.Options) { o.NodeUID = "" })
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); !errors.Is(err, lease.ErrOwnerUnknown) {
		t.Fatalf("renewal without an owner: %v, want ErrOwnerUnknown", err)
	}
	if n := count(cs, "create", "leases"); n != 0 {
		t.Fatalf("%d lease creates before the Node's UID was known", n)
	}
	r.SetOwner("u1")
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if refs := getLease(t, cs).OwnerReferences; len(refs) != 1 || refs[0].UID != "u1" {
		t.Fatalf("owner references of the first write %v", refs)
	}
}

// OnRepeatedFailure is called from the second consecutive failed request on,
// and the count starts again after a success.
func TestOnRepeatedFailure(t *testing.T) {
	cs := fake.NewClientset()
	calls := 0
	r := newRenewer(t, cs, clocktesting.NewFakeClock(t0), func(o *lease.Options) { o.OnRepeatedFailure = func() { calls++ } })
	ctx := context.Background()
	if _, err := r.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	fails := 1
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails > 0 {
			fails--
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		return false, nil, nil
	})
	if _, err := r.SyncOnce(ctx); err != nil { // one failed attempt, then success
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("hook called %d times after a single failure", calls)
	}
	fails = 3
	if _, err := r.SyncOnce(ctx); err != nil { // three failed attempts, then success
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("hook called %d times after three consecutive failures, want 2", calls)
	}
}

func TestRunTimingAndBackoff(t *testing.T) {
	defer leakcheck.Check(t)()
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(t0)
	r := newRenewer(t, cs, fc, nil)
	var (
		mu      sync.Mutex
		failing bool
		updates []time.Time
	)
	cs.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		if a.GetVerb() == "update" || a.GetVerb() == "create" {
			updates = append(updates, fc.Now())
		}
		return false, nil, nil
	})
	n := func() int { mu.Lock(); defer mu.Unlock(); return len(updates) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()

	testenv.Eventually(t, 10*time.Second, time.Millisecond, "first renewal", func() bool { return n() == 1 && fc.HasWaiters() })
	for i := 2; i <= 4; i++ {
		fc.Step(10*time.Second - time.Millisecond)
		if n() != i-1 {
			t.Fatalf("renewed before the interval passed")
		}
		fc.Step(time.Millisecond)
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "renewal", func() bool { return n() == i && fc.HasWaiters() })
	}
	// API server down: back-off 200ms, 400ms, 800ms, ... 7s.
	mu.Lock()
	failing = true
	mu.Unlock()
	fc.Step(10 * time.Second)
	attempts := func() int { return count(cs, "update", "leases") }
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "failing renewal", func() bool { return fc.HasWaiters() && attempts() >= 3+lease.MaxUpdateAttempts })
	for _, d := range []time.Duration{200, 400, 800, 1600, 3200, 6400, 7000, 7000} {
		before := len(cs.Actions())
		fc.Step(d*time.Millisecond - time.Millisecond)
		if len(cs.Actions()) != before {
			t.Fatalf("retried before the %dms back-off", d)
		}
		fc.Step(time.Millisecond)
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "retry", func() bool { return len(cs.Actions()) > before && fc.HasWaiters() })
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	fc.Step(7 * time.Second)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "renewal after recovery", func() bool { return n() == 5 && fc.HasWaiters() })
	fc.Step(10 * time.Second)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "regular renewal after recovery", func() bool { return n() == 6 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v, want nil when its context ends", err)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(t0)
	r1 := newRenewer(t, cs, fc, func(o *lease.Options) { o.Registerer = reg })
	r2 := newRenewer(t, cs, fc, func(o *lease.Options) { o.Registerer = reg; o.NodeName = "n2" })
	ctx := context.Background()
	_, _ = r1.SyncOnce(ctx)
	_, _ = r2.SyncOnce(ctx)
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	_, _ = r1.SyncOnce(ctx)
	got := testenv.Metrics(t, reg)
	want := map[string]float64{lease.MetricRenewals: 2, lease.MetricRenewalFailures: 1, lease.MetricRenewalDuration: 3}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// A lease of a few seconds (as tests and simulations use) is valid with the
// default back-off: the 7s cap shrinks to fit renew interval + duration.
func TestShortLeaseDefaultBackoff(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 4 * time.Second, 5 * time.Second} {
		if _, err := lease.New(lease.Options{Leases: fake.NewClientset().CoordinationV1().Leases(lease.DefaultNamespace), NodeName: "n1", LeaseDuration: d}); err != nil {
			t.Fatalf("LeaseDuration %v: %v", d, err)
		}
	}
}
