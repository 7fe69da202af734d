package fleet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

var cp *controlplane.ControlPlane // started by TestMain

// protobufClient returns an admin client talking protobuf, and its lease
// client with LeanLeases; the lean path's connection is closed when the
// test ends.
func protobufClient(t *testing.T) (kubernetes.Interface, *fleet.LeanLeaseClient) {
	t.Helper()
	cp := controlplane.Need(t, cp)
	cfg := cp.AdminConfig()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lean, err := fleet.LeanLeases(client.CoordinationV1().Leases(corev1.NamespaceNodeLease), cfg, corev1.NamespaceNodeLease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lean.CloseIdleConnections)
	return client, lean
}

// The lean lease path answers as client-go does: the objects, and API errors
// that apierrors recognises.
func TestIntegrationLeanLeases(t *testing.T) {
	client, lean := protobufClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leases := lean
	if _, err := leases.Get(ctx, "lean-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing lease: %v", err)
	}
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	want := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lean-a", Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("lean-a"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
	}
	created, err := leases.Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || !created.Spec.RenewTime.Equal(&now) || *created.Spec.HolderIdentity != "lean-a" {
		t.Fatalf("created %+v", created)
	}
	if _, err := leases.Create(ctx, want, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create: %v", err)
	}
	later := metav1.NewMicroTime(now.Add(10 * time.Second))
	update := created.DeepCopy()
	update.Spec.RenewTime = &later
	updated, err := leases.Update(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion || !updated.Spec.RenewTime.Equal(&later) {
		t.Fatalf("updated %+v", updated)
	}
	if _, err := leases.Update(ctx, update, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("Update from a stale resourceVersion: %v", err)
	}
	got, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "lean-a", metav1.GetOptions{})
	if err != nil || !got.Spec.RenewTime.Equal(&later) || got.ResourceVersion != updated.ResourceVersion {
		t.Fatalf("read back through client-go: %+v, %v", got, err)
	}
	bad := want.DeepCopy()
	bad.Name = "Not_A_Name"
	if _, err := leases.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("Create of an invalid name: %v", err)
	}
	// Other requests go through client-go.
	if err := leases.Delete(ctx, "lean-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A fleet on the real API server: every node registers Ready and renews its
// lease; a stopped node's lease goes stale on the server while the others
// stay fresh; stopping Run leaves no goroutine behind.
func TestIntegrationFleet(t *testing.T) {
	client, lean := protobufClient(t)
	// Runs after the other cleanups. Requests that Run's end cancelled can
	// keep an HTTP/2 connection busy a moment longer: close the idle
	// connections of both paths (client-go's transport is shared and
	// cached) until no new goroutine is left.
	cached, err := rest.TransportFor(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leakcheck.CheckSettling(t, func() {
		lean.CloseIdleConnections()
		utilnet.CloseIdleConnectionsFor(cached)
	}))
	const nodes = 20
	f, err := fleet.New(fleet.Options{
		Nodes:                 client.CoreV1().Nodes(),
		Leases:                lean,
		Count:                 nodes,
		NamePrefix:            "itest-",
		LeaseDuration:         4 * time.Second,
		RenewInterval:         time.Second,
		StatusUpdateFrequency: time.Second,
		Workers:               4,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	}()
	if err := f.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitRenewals(ctx, 3*nodes); err != nil {
		t.Fatal(err)
	}
	fresh := func(l *coordinationv1.Lease) bool {
		return l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < 4*time.Second
	}
	for i := range nodes {
		name := f.Node(i).Name()
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !fleet.ConditionIs(corev1.NodeReady, corev1.ConditionTrue)(n) {
			t.Fatalf("node %s: %+v", name, n.Status.Conditions)
		}
		l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !fresh(l) || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
			t.Fatalf("lease %s: renewTime %v, owners %+v, node UID %s", name, l.Spec.RenewTime, l.OwnerReferences, n.UID)
		}
	}
	stopped := f.Node(5)
	stopped.StopLease()
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	testenv.Eventually(t, 20*time.Second, 200*time.Millisecond, "the stopped node's lease to go stale", func() bool {
		l, err := leases.Get(ctx, stopped.Name(), metav1.GetOptions{})
		return err == nil && !fresh(l)
	})
	for i := range nodes {
		if i == 5 {
			continue
		}
		if l, err := leases.Get(ctx, f.Node(i).Name(), metav1.GetOptions{}); err != nil || !fresh(l) {
			t.Fatalf("lease of running node %d: %+v, %v", i, l, err)
		}
	}
	if s := f.Stats(); s.LeaseErrors != 0 || s.StatusErrors != 0 || s.RegisterErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}
