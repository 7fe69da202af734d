package heartbeat_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/lease"

	"github.com/nodekit/nodekit/internal/testenv"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m, &cp)) }

// kubeletLike sets what kubelet's default setters set on an idle node: four
// conditions (heartbeat bumped every pass), capacity, allocatable, addresses,
// node info, the daemon endpoint and a few images.
type kubeletLike struct {
	clock clock.Clock
	ready atomic.Bool
	extra atomic.Int64 // changes allocatable when set, to force a change
}

func newKubeletLike(c clock.Clock) *kubeletLike {
	s := &kubeletLike{clock: c}
	s.ready.Store(true)
	return s
}

func (s *kubeletLike) SetStatus(_ context.Context, n *corev1.Node) error {
	now := metav1.NewTime(s.clock.Now())
	ready := corev1.ConditionFalse
	if s.ready.Load() {
		ready = corev1.ConditionTrue
	}
	setCondition(n, corev1.NodeMemoryPressure, corev1.ConditionFalse, now)
	setCondition(n, corev1.NodeDiskPressure, corev1.ConditionFalse, now)
	setCondition(n, corev1.NodePIDPressure, corev1.ConditionFalse, now)
	setCondition(n, corev1.NodeReady, ready, now)
	n.Status.Capacity = corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	if x := s.extra.Load(); x > 0 {
		n.Status.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(110-x, resource.DecimalSI)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.Name}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "01234567-89ab-cdef-0123-456789abcdef",
		BootID: "fedcba98-7654-3210-fedc-ba9876543210", KernelVersion: "6.1.0-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
		ContainerRuntimeVersion: "containerd://1.6.20", KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64",
	}
	n.Status.Images = []corev1.ContainerImage{
		{Names: []string{"registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097", "registry.k8s.io/pause:3.10"}, SizeBytes: 320368},
		{Names: []string{"docker.io/library/busybox@sha256:9ae97d36d26566ff84e8893c64a6dc4fe8ca6d1144bf5b87b2b85a32def253c7", "docker.io/library/busybox:1.36"}, SizeBytes: 2160406},
	}
	return nil
}

func integration(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	return controlplane.Need(t, cp)
}

func nodeClient(t *testing.T, name string, wrap func(http.RoundTripper) http.RoundTripper) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	cfg, err := cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

func cleanup(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		admin := cp.AdminClient()
		_ = admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
	})
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestIntegrationRegisterStatusLease(t *testing.T) {
	integration(t)
	for _, mode := range []heartbeat.WriteMode{heartbeat.StrategicMergePatch, heartbeat.ServerSideApply} {
		t.Run(mode.String(), func(t *testing.T) {
			name := "reg-" + strings.ToLower(mode.String())
			cleanup(t, name)
			client, _ := nodeClient(t, name, nil)
			setter := newKubeletLike(clock.RealClock{})
			hb, err := heartbeat.New(heartbeat.Options{
				Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: setter, WriteMode: mode,
				Strategy: heartbeat.StatusOnlyStrategy(), // every round writes
				Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
					Labels: map[string]string{corev1.LabelHostname: name},
				}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/edge", Effect: corev1.TaintEffectNoSchedule}}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxFor(t, time.Minute)
			admin := cp.AdminClient()
			for range 2 {
				if err := hb.SyncStatus(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// The lease, with its owner reference, written as the node.
			lr, err := lease.New(lease.Options{Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: client.CoreV1().Nodes(), NodeName: name, NodeUID: hb.Node().UID})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lr.SyncOnce(ctx); err != nil {
				t.Fatal(err)
			}
			l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *l.Spec.HolderIdentity != name || *l.Spec.LeaseDurationSeconds != 40 || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != hb.Node().UID {
				t.Fatalf("lease %+v", l)
			}
			// Another agent writes its condition between two heartbeats.
			patch := `{"status":{"conditions":[{"type":"KernelDeadlock","status":"False","reason":"KernelHasNoDeadlock","message":"kernel has no deadlock"}]}}`
			if _, err := admin.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "node-problem-detector"}, "status"); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if i == 4 {
					setter.ready.Store(false)
				}
				if err := hb.SyncStatus(ctx); err != nil {
					t.Fatal(err)
				}
			}
			n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c := condition(n, "KernelDeadlock"); c == nil || c.Reason != "KernelHasNoDeadlock" {
				t.Fatalf("foreign condition lost: %+v", n.Status.Conditions)
			}
			if c := condition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionFalse {
				t.Fatalf("own Ready condition not written: %+v", n.Status.Conditions)
			}
			if len(n.Spec.Taints) == 0 || n.Labels[corev1.LabelHostname] != name || n.Status.Capacity.Cpu().String() != "32" {
				t.Fatalf("registered node %+v", n)
			}
			if mode == heartbeat.ServerSideApply {
				var managers []string
				for _, mf := range n.ManagedFields {
					managers = append(managers, mf.Manager+"/"+string(mf.Operation)+"/"+mf.Subresource)
				}
				if !strings.Contains(strings.Join(managers, " "), "nodekit/Apply/status") {
					t.Fatalf("managers %v", managers)
				}
			}
		})
	}
}

func TestIntegrationReRegisterAndLeaseRecreated(t *testing.T) {
	integration(t)
	const name = "rereg"
	cleanup(t, name)
	client, _ := nodeClient(t, name, nil)
	setter := newKubeletLike(clock.RealClock{})
	hb, err := heartbeat.New(heartbeat.Options{Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: setter, ReRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	admin := cp.AdminClient()
	if err := hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	uid1 := hb.Node().UID
	// The lease is deleted behind the renewer's back: the next renewal
	// creates it again.
	if err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease not recreated: %v", err)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != uid1 {
		t.Fatalf("recreated lease owners %v", l.OwnerReferences)
	}
	// The node is deleted: the next status write (here, a change) finds
	// out, the node is registered again, and the lease's owner follows the
	// new UID.
	if err := admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	setter.ready.Store(false)
	var uid2 types.UID
	for i := 0; uid2 == "" || uid2 == uid1; i++ {
		if i == 3 {
			t.Fatalf("not registered again after %d rounds", i)
		}
		_ = hb.SyncStatus(ctx)
		if n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			uid2 = n.UID
		}
	}
	if _, err := hb.SyncLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != uid2 {
		t.Fatalf("lease owners %v, want the new node %s", l.OwnerReferences, uid2)
	}
}

// conflictFirst answers 409 to the first write of each pair to node status
// and to the lease, without sending it.
type conflictFirst struct {
	next  http.RoundTripper
	mu    sync.Mutex
	seen  map[string]int
	fakes atomic.Int32
}

func (c *conflictFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch || req.Method == http.MethodPut {
		key := req.Method + " " + req.URL.Path
		c.mu.Lock()
		c.seen[key]++
		odd := c.seen[key]%2 == 1
		c.mu.Unlock()
		if odd {
			c.fakes.Add(1)
			if req.Body != nil {
				_ = req.Body.Close()
			}
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected conflict","reason":"Conflict","code":409}`
			return &http.Response{
				StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header:  http.Header{"Content-Type": []string{"application/json"}},
				Body:    io.NopCloser(strings.NewReader(body)),
				Request: req, ContentLength: int64(len(body)),
			}, nil
		}
	}
	return c.next.RoundTrip(req)
}

func TestIntegrationConflictOnEveryFirstAttempt(t *testing.T) {
	integration(t)
	const name = "conflicts"
	cleanup(t, name)
	var inj *conflictFirst
	client, _ := nodeClient(t, name, func(rt http.RoundTripper) http.RoundTripper {
		inj = &conflictFirst{next: rt, seen: map[string]int{}}
		return inj
	})
	hb, err := heartbeat.New(heartbeat.Options{Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: newKubeletLike(clock.RealClock{}), Strategy: heartbeat.StatusOnlyStrategy()})
	if err != nil {
		t.Fatal(err)
	}
	lr, err := lease.New(lease.Options{Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: client.CoreV1().Nodes(), NodeName: name, LookupNodeUID: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	for i := range 5 {
		if err := hb.SyncStatus(ctx); err != nil {
			t.Fatalf("status round %d: %v", i, err)
		}
		if _, err := lr.SyncOnce(ctx); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	if inj.fakes.Load() < 8 {
		t.Fatalf("only %d conflicts injected", inj.fakes.Load())
	}
	l, err := cp.AdminClient().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil || time.Since(l.Spec.RenewTime.Time) > 10*time.Second {
		t.Fatalf("lease %v, %v", l, err)
	}
}

// hangFirst holds the first n requests until they are cancelled.
type hangFirst struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (h *hangFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.n.Add(-1) >= 0 {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return h.next.RoundTrip(req)
}

func TestIntegrationClientTimesOut(t *testing.T) {
	integration(t)
	const name = "timeouts"
	cleanup(t, name)
	var hang *hangFirst
	client, _ := nodeClient(t, name, func(rt http.RoundTripper) http.RoundTripper {
		hang = &hangFirst{next: rt}
		return hang
	})
	hb, err := heartbeat.New(heartbeat.Options{
		Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: newKubeletLike(clock.RealClock{}),
		Strategy: heartbeat.StatusOnlyStrategy(), RequestTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	lr, err := lease.New(lease.Options{Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), Nodes: client.CoreV1().Nodes(), NodeName: name, RequestTimeout: 500 * time.Millisecond, LookupNodeUID: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	if err := hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lr.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// The status write hangs: attempt 0 times out, attempt 1 reads and writes.
	hang.n.Store(1)
	start := time.Now()
	if err := hb.SyncStatus(ctx); err != nil {
		t.Fatalf("status round with one hung request: %v", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Fatalf("status round took %v", d)
	}
	// The renewal hangs: the renewal fails after its timeout, the next works.
	hang.n.Store(1)
	start = time.Now()
	if _, err := lr.SyncOnce(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("renewal with a hung request: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("renewal took %v", d)
	}
	if _, err := lr.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
}

// leaseLag polls the lease as admin every 250ms and records how far its
// renewTime falls behind, while the API server is up.
type leaseLag struct {
	mu       sync.Mutex
	max      time.Duration
	last     time.Time
	renewals int // distinct renewTimes seen
}

func watchLease(ctx context.Context, admin kubernetes.Interface, name string, lag *leaseLag) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			continue
		}
		d := time.Since(l.Spec.RenewTime.Time)
		lag.mu.Lock()
		lag.max = max(lag.max, d)
		if !l.Spec.RenewTime.Time.Equal(lag.last) {
			lag.renewals++
		}
		lag.last = l.Spec.RenewTime.Time
		lag.mu.Unlock()
	}
}

func (l *leaseLag) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

func (l *leaseLag) get() (time.Duration, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max, l.last
}

func (l *leaseLag) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.max = 0
}

// With the defaults, a running heartbeat keeps renewTime within 40s of now
// while the API server is up; it survives a 30s API server outage by itself
// and renews within one interval after the server returns.
func TestIntegrationRunSurvivesAPIServerOutage(t *testing.T) {
	cp := integration(t)
	if testing.Short() {
		t.Skip("long")
	}
	const name = "outage"
	cleanup(t, name)
	client, _ := nodeClient(t, name, nil)
	setter := newKubeletLike(clock.RealClock{})
	hb, err := heartbeat.New(heartbeat.Options{Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace), NodeName: name, StatusSetter: setter})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hb.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}()
	admin := cp.AdminClient()
	lag := &leaseLag{}
	wctx, wcancel := context.WithCancel(ctx)
	go watchLease(wctx, admin, name, lag)

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "registration and first renewal", func() bool {
		_, last := lag.get()
		return !last.IsZero()
	})
	// Steady state: the lag is sampled across three more renewals.
	testenv.Eventually(t, 45*time.Second, 100*time.Millisecond, "three renewals in steady state", func() bool { return lag.count() >= 4 })
	wcancel()
	if m, _ := lag.get(); m > 40*time.Second {
		t.Fatalf("renewTime fell %v behind with the server up", m)
	} else {
		t.Logf("largest renewTime lag with the server up: %v", m)
	}

	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Second) // the outage itself: 30s without an API server
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	var renewed time.Time
	testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, "renewal after the API server returned", func() bool {
		l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime.After(back) {
			renewed = l.Spec.RenewTime.Time
			return true
		}
		return false
	})
	if d := renewed.Sub(back); d > 10*time.Second+400*time.Millisecond {
		t.Fatalf("renewed %v after the server returned, more than one interval", d)
	} else {
		t.Logf("renewed %v after the API server returned", d)
	}
	// The status loop carries on: a change is posted within a round.
	setter.ready.Store(false)
	testenv.Eventually(t, 15*time.Second, 100*time.Millisecond, "status post after the outage", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && readyOf(n) == corev1.ConditionFalse
	})
	// And the lease stays fresh again.
	lag.reset()
	wctx, wcancel = context.WithCancel(ctx)
	defer wcancel()
	go watchLease(wctx, admin, name, lag)
	seen := lag.count()
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "two renewals after recovery", func() bool { return lag.count() >= seen+2 })
	if m, _ := lag.get(); m > 40*time.Second {
		t.Fatalf("renewTime %v behind after recovery", m)
	}
}

func readyOf(n *corev1.Node) corev1.ConditionStatus {
	if c := condition(n, corev1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}

var deleteNow = metav1.DeleteOptions{}
