package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"

	"github.com/nodekit/nodekit/internal/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var nodeGR = schema.GroupResource{Resource: "nodes"}

// testSetter follows kubelet's condition rules: it owns Ready and
// MemoryPressure, bumps their heartbeat times on every pass and moves the
// transition time only when the status changes; it sets capacity.
type testSetter struct {
	clock clock.Clock
	ready atomic.Bool
	calls atomic.Int32
}

func (s *testSetter) SetStatus(_ context.Context, n *corev1.Node) error {
	s.calls.Add(1)
	now := metav1.NewTime(s.clock.Now())
	ready := corev1.ConditionFalse
	if s.ready.Load() {
		ready = corev1.ConditionTrue
	}
	setCondition(n, corev1.NodeMemoryPressure, corev1.ConditionFalse, now)
	setCondition(n, corev1.NodeReady, ready, now)
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	return nil
}

func setCondition(n *corev1.Node, t corev1.NodeConditionType, s corev1.ConditionStatus, now metav1.Time) {
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.LastTransitionTime = now
			}
			c.Status, c.LastHeartbeatTime, c.Reason = s, now, "Test"+string(s)
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "Test" + string(s)})
}

var _ nodestatus.StatusSetter = (*testSetter)(nil)

type env struct {
	cs     *fake.Clientset
	fc     *clocktesting.FakeClock
	setter *testSetter
	hb     *heartbeat.Heartbeat
}

func newEnv(t *testing.T, mod func(*heartbeat.Options)) *env {
	t.Helper()
	e := &env{cs: fake.NewClientset(), fc: clocktesting.NewFakeClock(t0)}
	// As the API server, give a created Node a UID (the lease waits for it).
	var uids atomic.Int32
	e.cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if n := a.(k8stesting.CreateAction).GetObject().(*corev1.Node); n.UID == "" {
			n.UID = types.UID(fmt.Sprintf("uid-%d", uids.Add(1)))
		}
		return false, nil, nil
	})
	e.setter = &testSetter{clock: e.fc}
	o := heartbeat.Options{
		Nodes: e.cs.CoreV1().Nodes(), Leases: e.cs.CoordinationV1().Leases(lease.DefaultNamespace),
		NodeName:     "n1",
		StatusSetter: e.setter,
		Clock:        e.fc,
		Jitter:       -1,
		Rand:         func() float64 { return 0.5 }, // no report spreading
		LeaseOptions: lease.Options{Jitter: -1},
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{corev1.LabelHostname: "n1", "custom": "x"},
			Annotations: map[string]string{heartbeat.ControllerManagedAttachAnnotation: "true"},
		}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}}},
	}
	if mod != nil {
		mod(&o)
	}
	hb, err := heartbeat.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.hb = hb
	return e
}

func (e *env) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) count(verb, resource string) int {
	n := 0
	for _, a := range e.cs.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func (e *env) verbs(resource string) string {
	var v []string
	for _, a := range e.cs.Actions() {
		if a.GetResource().Resource == resource {
			v = append(v, a.GetVerb())
		}
	}
	return strings.Join(v, ",")
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func TestRegisterCreatesNodeFromTemplate(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if err := e.hb.Register(ctx); err != nil {
		t.Fatal(err)
	}
	n := e.node(t)
	if n.Labels["custom"] != "x" || len(n.Spec.Taints) != 1 || n.Annotations[heartbeat.ControllerManagedAttachAnnotation] != "true" {
		t.Fatalf("registered node %+v", n.ObjectMeta)
	}
	if condition(n, corev1.NodeReady) == nil || n.Status.Capacity.Cpu().String() != "4" {
		t.Fatalf("registered node without computed status: %+v", n.Status)
	}
	if !e.hb.Registered() {
		t.Fatal("not registered")
	}
}

func TestRegisterReconcilesExistingNode(t *testing.T) {
	e := newEnv(t, nil)
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   "n1",
		UID:    "old",
		Labels: map[string]string{corev1.LabelHostname: "stale", "other": "kept"},
	}}
	if err := e.cs.Tracker().Add(existing); err != nil {
		t.Fatal(err)
	}
	if err := e.hb.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := e.verbs("nodes"), "create,get,patch"; got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
	n := e.node(t)
	if n.Labels[corev1.LabelHostname] != "n1" || n.Labels["other"] != "kept" || n.Labels["custom"] != "" {
		t.Fatalf("labels %v: want managed label fixed, others untouched, unmanaged template labels not added", n.Labels)
	}
	if n.Annotations[heartbeat.ControllerManagedAttachAnnotation] != "true" || n.Status.Capacity.Cpu().String() != "4" {
		t.Fatalf("not reconciled: %+v", n)
	}
	// Nothing to reconcile: no patch.
	e2 := newEnv(t, nil)
	_ = e2.cs.Tracker().Add(n)
	if err := e2.hb.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := e2.verbs("nodes"), "create,get"; got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}

func TestRegisterFailsWithAPIError(t *testing.T) {
	e := newEnv(t, nil)
	e.cs.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	err := e.hb.Register(context.Background())
	if !apierrors.IsInternalError(err) {
		t.Fatalf("error %v", err)
	}
	if e.hb.Registered() {
		t.Fatal("registered after a failure")
	}
}

func TestLeaseStrategyPostsOnChangeAndReportFrequency(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil { // registers with the computed status
		t.Fatal(err)
	}
	if got := e.count("patch", "nodes"); got != 0 {
		t.Fatalf("%d patches after the first round, want 0 (the Node was created with its status)", got)
	}
	e.cs.ClearActions()
	// Unchanged status: computed every 10s, posted only after 5m.
	for i := 1; i < 30; i++ {
		e.fc.Step(10 * time.Second)
		if err := e.hb.SyncStatus(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.cs.Actions()); n != 0 {
		t.Fatalf("%d requests for an unchanged status within 5m: %s", n, e.verbs("nodes"))
	}
	e.fc.Step(10 * time.Second) // 5m since the last post
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.verbs("nodes"); got != "patch" {
		t.Fatalf("requests at 5m %q, want one patch", got)
	}
	// A change is posted at once, with no GET.
	e.cs.ClearActions()
	e.fc.Step(10 * time.Second)
	e.setter.ready.Store(true)
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.verbs("nodes"); got != "patch" {
		t.Fatalf("requests on change %q, want one patch", got)
	}
	if c := condition(e.node(t), corev1.NodeReady); c.Status != corev1.ConditionTrue || !c.LastHeartbeatTime.Time.Equal(e.fc.Now()) {
		t.Fatalf("ready condition %+v", c)
	}
}

func TestReportSpreading(t *testing.T) {
	// Rand 0 shifts the next report after a change by -report/2.
	e := newEnv(t, func(o *heartbeat.Options) { o.Rand = func() float64 { return 0 } })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	e.cs.ClearActions()
	for range 14 {
		e.fc.Step(10 * time.Second)
		_ = e.hb.SyncStatus(ctx)
	}
	if n := e.count("patch", "nodes"); n != 0 {
		t.Fatalf("posted before 2m30s")
	}
	e.fc.Step(10 * time.Second)
	_ = e.hb.SyncStatus(ctx)
	if n := e.count("patch", "nodes"); n != 1 {
		t.Fatalf("not posted at 2m30s")
	}
}

func TestStatusOnlyPostsEveryRound(t *testing.T) {
	e := newEnv(t, func(o *heartbeat.Options) { o.Strategy = heartbeat.StatusOnlyStrategy() })
	if e.hb.Renewer() != nil {
		t.Fatal("StatusOnly built a lease")
	}
	ctx := context.Background()
	for range 5 {
		if err := e.hb.SyncStatus(ctx); err != nil {
			t.Fatal(err)
		}
		e.fc.Step(10 * time.Second)
	}
	if n := e.count("patch", "nodes"); n != 5 {
		t.Fatalf("%d patches, want 5", n)
	}
	if n := e.count("get", "nodes"); n != 0 {
		t.Fatalf("%d GETs, want none (attempt 0 uses the last known node)", n)
	}
	if _, err := e.hb.SyncLease(ctx); err != nil || e.count("create", "leases") != 0 {
		t.Fatalf("SyncLease without a lease: %v", err)
	}
}

func TestConflictOnFirstAttemptRetriesFromFreshGet(t *testing.T) {
	e := newEnv(t, func(o *heartbeat.Options) { o.Strategy = heartbeat.StatusOnlyStrategy() })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	first := true
	e.cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if first {
			first = false
			return true, nil, apierrors.NewConflict(nodeGR, "n1", errors.New("stale"))
		}
		return false, nil, nil
	})
	e.cs.ClearActions()
	e.fc.Step(10 * time.Second)
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := e.verbs("nodes"), "patch,get,patch"; got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}

func TestAllStatusAttemptsFail(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *heartbeat.Options) { o.Strategy = heartbeat.StatusOnlyStrategy(); o.Registerer = reg })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	e.cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTooManyRequests("slow down", 1)
	})
	e.cs.ClearActions()
	err := e.hb.SyncStatus(ctx)
	if !errors.Is(err, heartbeat.ErrStatusAttempts) || !apierrors.IsTooManyRequests(err) {
		t.Fatalf("error %v", err)
	}
	if p, g := e.count("patch", "nodes"), e.count("get", "nodes"); p != 5 || g != 4 {
		t.Fatalf("%d patches and %d GETs, want 5 and 4", p, g)
	}
	got := testenv.Metrics(t, reg)
	if got[heartbeat.MetricStatusPosts] != 1 || got[heartbeat.MetricStatusFailures] != 1 || got[heartbeat.MetricStatusRounds] != 2 || got[heartbeat.MetricRegistrations] != 1 || got[heartbeat.MetricStatusDuration] != 2 {
		t.Fatalf("metrics %v", got)
	}
}

func TestNodeDeletedIsRegisteredAgainAndLeaseFollows(t *testing.T) {
	e := newEnv(t, func(o *heartbeat.Options) { o.ReRegister = true })
	ctx := context.Background()
	e.cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := a.(k8stesting.CreateAction).GetObject().(*corev1.Node)
		n.UID = types.UID("uid-" + e.fc.Now().Format("150405"))
		return false, nil, nil
	})
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	uid1 := e.node(t).UID
	if refs := e.hb.Renewer().Latest().OwnerReferences; len(refs) != 1 || refs[0].UID != uid1 {
		t.Fatalf("lease owners %v, want %s", refs, uid1)
	}
	if err := e.cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.fc.Step(10 * time.Second)
	e.setter.ready.Store(true) // a change, so the round writes and finds the node gone
	err := e.hb.SyncStatus(ctx)
	if !errors.Is(err, heartbeat.ErrNodeNotFound) {
		t.Fatalf("error %v, want ErrNodeNotFound", err)
	}
	if e.hb.Registered() {
		t.Fatal("still registered")
	}
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	uid2 := e.node(t).UID
	if uid2 == uid1 || uid2 == "" {
		t.Fatalf("node not recreated: uid %q", uid2)
	}
	if _, err := e.hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	if refs := e.hb.Renewer().Latest().OwnerReferences; len(refs) != 1 || refs[0].UID != uid2 {
		t.Fatalf("lease owners %v, want %s", refs, uid2)
	}
}

func TestNoReRegistration(t *testing.T) {
	e := newEnv(t, func(o *heartbeat.Options) { o.Strategy = heartbeat.StatusOnlyStrategy() })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	_ = e.cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{})
	for range 2 {
		if err := e.hb.SyncStatus(ctx); !errors.Is(err, heartbeat.ErrNodeNotFound) {
			t.Fatalf("error %v", err)
		}
	}
	if n := e.count("create", "nodes"); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
}

func TestDisableRegistrationReadsExistingNode(t *testing.T) {
	e := newEnv(t, func(o *heartbeat.Options) { o.DisableRegistration = true })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); !errors.Is(err, heartbeat.ErrNodeNotFound) {
		t.Fatalf("error %v, want ErrNodeNotFound", err)
	}
	_ = e.cs.Tracker().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u"}})
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if e.count("create", "nodes") != 0 || condition(e.node(t), corev1.NodeReady) == nil {
		t.Fatal("status not written to the existing node")
	}
}

// Conditions written by another agent survive ten more heartbeats, in both
// write modes.
func TestForeignConditionsSurvive(t *testing.T) {
	for _, mode := range []heartbeat.WriteMode{heartbeat.StrategicMergePatch, heartbeat.ServerSideApply} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t, func(o *heartbeat.Options) { o.Strategy = heartbeat.StatusOnlyStrategy(); o.WriteMode = mode })
			ctx := context.Background()
			for range 2 {
				if err := e.hb.SyncStatus(ctx); err != nil {
					t.Fatal(err)
				}
				e.fc.Step(10 * time.Second)
			}
			// Another agent adds its condition between two heartbeats.
			patch := `{"status":{"conditions":[{"type":"KernelDeadlock","status":"False","reason":"KernelHasNoDeadlock"}]}}`
			if _, err := e.cs.CoreV1().Nodes().Patch(ctx, "n1", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "npd"}, "status"); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if i == 5 {
					e.setter.ready.Store(true)
				}
				if err := e.hb.SyncStatus(ctx); err != nil {
					t.Fatal(err)
				}
				e.fc.Step(10 * time.Second)
			}
			n := e.node(t)
			if c := condition(n, "KernelDeadlock"); c == nil || c.Reason != "KernelHasNoDeadlock" {
				t.Fatalf("foreign condition lost: %+v", n.Status.Conditions)
			}
			if c := condition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
				t.Fatalf("own condition not written: %+v", n.Status.Conditions)
			}
			if e.count("patch", "nodes") < 12 {
				t.Fatalf("only %d status writes", e.count("patch", "nodes"))
			}
		})
	}
}

func TestStatusChanged(t *testing.T) {
	a := &corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: "A", Status: "True", LastHeartbeatTime: metav1.NewTime(t0)},
		{Type: "B", Status: "False", LastHeartbeatTime: metav1.NewTime(t0)},
	}}
	b := a.DeepCopy()
	b.Conditions[0], b.Conditions[1] = b.Conditions[1], b.Conditions[0]
	b.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(time.Hour))
	if heartbeat.StatusChanged(a, b) {
		t.Fatal("heartbeat time or order counted as a change")
	}
	b.Conditions[0].Reason = "x"
	if !heartbeat.StatusChanged(a, b) {
		t.Fatal("reason change missed")
	}
	c := a.DeepCopy()
	c.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if !heartbeat.StatusChanged(a, c) {
		t.Fatal("capacity change missed")
	}
	d := a.DeepCopy()
	d.Conditions = d.Conditions[:1]
	if !heartbeat.StatusChanged(a, d) {
		t.Fatal("removed condition missed")
	}
	e := a.DeepCopy()
	e.Conditions[1].LastTransitionTime = metav1.NewTime(t0)
	if !heartbeat.StatusChanged(a, e) {
		t.Fatal("transition time change missed")
	}
	f := a.DeepCopy()
	f.Conditions[1].Type = "C"
	if !heartbeat.StatusChanged(a, f) {
		t.Fatal("replaced condition type missed")
	}

	// The same quantity written another way is no change; another value is.
	withCPU := func(q string) *corev1.NodeStatus {
		s := a.DeepCopy()
		s.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
		return s
	}
	if heartbeat.StatusChanged(withCPU("1"), withCPU("1000m")) {
		t.Fatal("1 and 1000m counted as a change")
	}
	if !heartbeat.StatusChanged(withCPU("1"), withCPU("2")) {
		t.Fatal("allocatable change missed")
	}

	images := func(size int64, names ...string) *corev1.NodeStatus {
		s := a.DeepCopy()
		s.Images = []corev1.ContainerImage{{Names: names, SizeBytes: size}}
		return s
	}
	if heartbeat.StatusChanged(images(10, "a", "b"), images(10, "a", "b")) {
		t.Fatal("equal images counted as a change")
	}
	for _, other := range []*corev1.NodeStatus{images(11, "a", "b"), images(10, "a"), images(10, "a", "c")} {
		if !heartbeat.StatusChanged(images(10, "a", "b"), other) {
			t.Fatalf("image change missed: %v", other.Images)
		}
	}
	if heartbeat.StatusChanged(&corev1.NodeStatus{}, &corev1.NodeStatus{Images: []corev1.ContainerImage{}, Capacity: corev1.ResourceList{}}) {
		t.Fatal("nil and empty counted as a change")
	}

	// Fields compared semantically as a whole still count.
	g := a.DeepCopy()
	g.NodeInfo.KernelVersion = "6.1"
	if !heartbeat.StatusChanged(a, g) {
		t.Fatal("nodeInfo change missed")
	}
	h := a.DeepCopy()
	h.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	if !heartbeat.StatusChanged(a, h) {
		t.Fatal("address change missed")
	}
}

func TestEvents(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	e := newEnv(t, func(o *heartbeat.Options) { o.Recorder = rec })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	e.setter.ready.Store(true)
	_ = e.hb.SyncStatus(ctx)
	e.setter.ready.Store(false)
	_ = e.hb.SyncStatus(ctx)
	_ = e.hb.SyncStatus(ctx)
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		got = append(got, ev)
	}
	want := []string{"Normal NodeReady Node n1 status is now: NodeReady", "Normal NodeNotReady Node n1 status is now: NodeNotReady"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestOptionValidation(t *testing.T) {
	cs := fake.NewClientset()
	s := nodestatus.StatusSetterFunc(func(context.Context, *corev1.Node) error { return nil })
	for _, tc := range []struct {
		name  string
		mod   func(*heartbeat.Options)
		field string
	}{
		{"no nodes client", func(o *heartbeat.Options) { o.Nodes = nil }, "Nodes"},
		{"no leases client", func(o *heartbeat.Options) { o.Leases = nil }, "Leases"},
		{"no name", func(o *heartbeat.Options) { o.NodeName = "" }, "NodeName"},
		{"no setter", func(o *heartbeat.Options) { o.StatusSetter = nil }, "StatusSetter"},
		{"template name", func(o *heartbeat.Options) { o.Node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}} }, "Node.Name"},
		{"10ns update", func(o *heartbeat.Options) { o.NodeStatusUpdateFrequency = 10 }, "NodeStatusUpdateFrequency"},
		{"report", func(o *heartbeat.Options) { o.NodeStatusReportFrequency = 48 * time.Hour }, "NodeStatusReportFrequency"},
		{"jitter", func(o *heartbeat.Options) { o.Jitter = 1.5 }, "Jitter"},
		{"register backoff", func(o *heartbeat.Options) { o.RegisterBackoff = time.Millisecond }, "RegisterBackoff"},
		{"max register backoff", func(o *heartbeat.Options) { o.MaxRegisterBackoff = time.Hour }, "MaxRegisterBackoff"},
		{"fast", func(o *heartbeat.Options) { o.FastStatusInterval = time.Minute }, "FastStatusInterval"},
		{"grace", func(o *heartbeat.Options) { o.NodeReadyGracePeriod = 2 * time.Hour }, "NodeReadyGracePeriod"},
		{"mode", func(o *heartbeat.Options) { o.WriteMode = 7 }, "WriteMode"},
		{"lease options", func(o *heartbeat.Options) { o.LeaseOptions.RenewInterval = 5 }, "LeaseOptions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := heartbeat.Options{Nodes: cs.CoreV1().Nodes(), Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: "n1", StatusSetter: s}
			tc.mod(&o)
			_, err := heartbeat.New(o)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	if _, err := heartbeat.New(heartbeat.Options{Nodes: cs.CoreV1().Nodes(), Leases: cs.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: "n1", StatusSetter: s, LeaseOptions: lease.Options{NodeName: "n2"}}); err == nil {
		t.Fatal("the lease of another node was accepted")
	}
}

// recorder counts requests by verb and resource, safely for Run's goroutines.
type recorder struct {
	mu sync.Mutex
	n  map[string]int
	at map[string][]time.Time
}

func watchRequests(cs *fake.Clientset, fc *clocktesting.FakeClock) *recorder {
	r := &recorder{n: map[string]int{}, at: map[string][]time.Time{}}
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.mu.Lock()
		k := a.GetVerb() + " " + a.GetResource().Resource
		r.n[k]++
		r.at[k] = append(r.at[k], fc.Now())
		r.mu.Unlock()
		return false, nil, nil
	})
	return r
}

func (r *recorder) get(k string) int { r.mu.Lock(); defer r.mu.Unlock(); return r.n[k] }

func (r *recorder) times(k string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at[k]...)
}

func TestRunLoopsTimingAndFastStartup(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newEnv(t, nil)
	req := watchRequests(e.cs, e.fc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.hb.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}()

	// Registration (the Node created with its status) and the first lease
	// write happen at t0.
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "start-up", func() bool {
		return req.get("create nodes") == 1 && req.get("create leases") == 1 && e.fc.Waiters() == 2
	})
	// Fast status checks every 100ms compute without requests; the node
	// turns Ready at 1.05s and is posted at the 1.1s check.
	calls := e.setter.calls.Load()
	for range 10 {
		e.fc.Step(100 * time.Millisecond)
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "fast check", func() bool { return e.setter.calls.Load() > calls && e.fc.Waiters() == 2 })
		calls = e.setter.calls.Load()
	}
	if n := req.get("patch nodes"); n != 0 {
		t.Fatalf("%d status patches before Ready", n)
	}
	e.setter.ready.Store(true)
	e.fc.Step(100 * time.Millisecond)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "fast post", func() bool { return req.get("patch nodes") == 1 })
	if at := req.times("patch nodes")[0]; !at.Equal(t0.Add(1100 * time.Millisecond)) {
		t.Fatalf("fast post at %v", at.Sub(t0))
	}
	// After that, regular rounds only: lease every 10s, no status posts
	// (unchanged) until 5m.
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "timers", func() bool { return e.fc.Waiters() == 2 })
	for i := 1; i <= 6; i++ {
		target := t0.Add(time.Duration(i) * 10 * time.Second)
		e.fc.SetTime(target)
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "lease renewal", func() bool { return req.get("update leases") == i && e.fc.Waiters() == 2 })
	}
	if n := req.get("patch nodes"); n != 1 {
		t.Fatalf("%d status patches, want 1", n)
	}
	for i, at := range req.times("update leases") {
		if want := t0.Add(time.Duration(i+1) * 10 * time.Second); !at.Equal(want) {
			t.Fatalf("renewal %d at %v, want %v", i, at.Sub(t0), want.Sub(t0))
		}
	}
	if n := req.get("get leases") + req.get("get nodes"); n != 1 {
		t.Fatalf("%d GETs, want only the lease's first", n)
	}
}

func TestRunFastStartupGivesUpAfterGracePeriod(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newEnv(t, func(o *heartbeat.Options) { o.NodeReadyGracePeriod = time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.hb.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "start-up", func() bool { return e.hb.Registered() && e.fc.Waiters() == 2 })
	for range 12 {
		c := e.setter.calls.Load()
		e.fc.Step(100 * time.Millisecond)
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "step", func() bool { return e.setter.calls.Load() >= c && e.fc.Waiters() == 2 })
	}
	// Past the grace period: stepping 100ms no longer computes status.
	c := e.setter.calls.Load()
	for range 5 {
		e.fc.Step(100 * time.Millisecond)
	}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "timers", func() bool { return e.fc.Waiters() == 2 })
	if got := e.setter.calls.Load(); got != c {
		t.Fatalf("fast checks go on after the grace period (%d more)", got-c)
	}
}

func TestRunRegistrationBackoffAndReRegistration(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newEnv(t, func(o *heartbeat.Options) {
		o.Strategy = heartbeat.StatusOnlyStrategy()
		o.NodeReadyGracePeriod = -1
		o.ReRegister = true
	})
	var failing atomic.Int32
	failing.Store(4)
	e.cs.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Add(-1) >= 0 {
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		return false, nil, nil
	})
	req := watchRequests(e.cs, e.fc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.hb.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for i, d := range []time.Duration{100, 200, 400, 800} {
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "failed registration", func() bool { return req.get("create nodes") == i+1 && e.fc.HasWaiters() })
		e.fc.Step(d*time.Millisecond - time.Millisecond)
		if req.get("create nodes") != i+1 {
			t.Fatalf("retried before %dms", d)
		}
		e.fc.Step(time.Millisecond)
	}
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "registration", func() bool { return e.hb.Registered() && e.fc.HasWaiters() })
	// Deleted while running: the next round that writes (here: the node
	// turns Ready) finds out and registers again.
	_ = e.cs.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "n1")
	e.setter.ready.Store(true)
	e.fc.Step(10 * time.Second)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "re-registration", func() bool { return req.get("create nodes") == 6 && req.get("patch nodes") >= 1 && e.fc.HasWaiters() })
	if _, err := e.cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The garbage collector deletes the lease with its Node: the renewal
// recreates the lease, and the next status round reads the Node even though
// nothing changed, finds it gone and registers it again.
func TestLeaseGoneWithNodeTriggersNodeCheck(t *testing.T) {
	e := newEnv(t, func(o *heartbeat.Options) { o.ReRegister = true })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	e.fc.Step(10 * time.Second)
	if err := e.hb.SyncStatus(ctx); err != nil { // unchanged: no request
		t.Fatal(err)
	}
	_ = e.cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{})
	_ = e.cs.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "n1", metav1.DeleteOptions{})
	if _, err := e.hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	if e.hb.Renewer().Recreated() != 1 {
		t.Fatal("lease recreation not counted")
	}
	if err := e.hb.SyncStatus(ctx); !errors.Is(err, heartbeat.ErrNodeNotFound) {
		t.Fatalf("error %v, want ErrNodeNotFound", err)
	}
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count("create", "nodes"); n != 2 {
		t.Fatalf("%d node creates, want 2", n)
	}
}

// Readers never wait on the network: while a status write hangs (holding
// the step's lock), Node and Registered return, and so does the lease's
// Latest while a renewal hangs.
func TestReadersDoNotWaitForRequests(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newEnv(t, func(o *heartbeat.Options) { o.Strategy = heartbeat.StatusOnlyStrategy() })
	ctx := context.Background()
	if err := e.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	hang, release := make(chan struct{}), make(chan struct{})
	e.cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		close(hang)
		<-release
		return false, nil, nil
	})
	done := make(chan error)
	go func() { done <- e.hb.SyncStatus(ctx) }()
	<-hang
	read := make(chan *corev1.Node)
	go func() {
		_ = e.hb.Registered()
		read <- e.hb.Node()
	}()
	select {
	case n := <-read:
		if n == nil || n.Name != "n1" {
			t.Errorf("Node() = %v while a write hangs", n)
		}
	case <-time.After(5 * time.Second): // a deadline for a test that would otherwise hang, not a wait
		t.Error("Node() waited for the hanging status write")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The lease: Latest while an update hangs.
	l := newEnv(t, nil)
	if err := l.hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	hang, release = make(chan struct{}), make(chan struct{})
	l.cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		close(hang)
		<-release
		return false, nil, nil
	})
	ldone := make(chan error)
	go func() { _, err := l.hb.SyncLease(ctx); ldone <- err }()
	<-hang
	got := make(chan bool)
	go func() { got <- l.hb.Renewer().Latest() != nil }()
	select {
	case ok := <-got:
		if !ok {
			t.Error("Latest() = nil while a renewal hangs")
		}
	case <-time.After(5 * time.Second):
		t.Error("Latest() waited for the hanging renewal")
	}
	close(release)
	if err := <-ldone; err != nil {
		t.Fatal(err)
	}
}

// The lease strategy never creates the lease before the Node exists: the
// lease's first write carries the owner reference to the Node.
func TestLeaseNotCreatedBeforeNode(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.cs.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	if _, err := e.hb.SyncOnce(ctx); err == nil {
		t.Fatal("registration succeeded")
	}
	if _, err := e.hb.SyncLease(ctx); !errors.Is(err, lease.ErrOwnerUnknown) {
		t.Fatalf("lease step before the Node exists: %v, want lease.ErrOwnerUnknown", err)
	}
	if n := e.count("create", "leases"); n != 0 {
		t.Fatalf("%d lease creates before the Node exists", n)
	}
	e.cs.ReactionChain = e.cs.ReactionChain[1:] // registration works again
	if _, err := e.hb.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := e.cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if uid := e.node(t).UID; len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != uid {
		t.Fatalf("lease owners %v, want the Node %s", l.OwnerReferences, uid)
	}
}
