package controlplane_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.MainWith(m, &cp, controlplane.Options{Aggregator: true}))
}

// The node identity may write its own Node, its status and its Lease, and is
// forbidden from touching another node: the Node authorizer and
// NodeRestriction are really on.
func TestNodeIdentity(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	a, err := cp.NodeClient("a")
	if err != nil {
		t.Fatal(err)
	}
	node, err := a.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node a creating itself: %v", err)
	}
	var tainted bool
	for _, taint := range node.Spec.Taints {
		tainted = tainted || taint.Key == corev1.TaintNodeNotReady
	}
	if !tainted {
		t.Logf("new node has taints %v (the not-ready taint comes from admission when enabled)", node.Spec.Taints)
	}

	patch := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"smoke"}]}}`)
	got, err := a.CoreV1().Nodes().Patch(ctx, "a", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("node a patching its status: %v", err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "KubeletReady" {
		t.Fatalf("status after patch: %+v", got.Status.Conditions)
	}

	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](40)},
	}
	if _, err := a.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node a creating its lease: %v", err)
	}

	admin := cp.AdminClient()
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = a.CoreV1().Nodes().Patch(ctx, "b", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("node a patching node b's status: got %v, want Forbidden", err)
	}
	err = a.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("node a deleting node b: got %v, want Forbidden", err)
	}
	lease.Name = "b"
	_, err = a.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("node a creating node b's lease: got %v, want Forbidden", err)
	}
}

// The API server comes back on the same address with the same certificates,
// so clients made before the restart keep working.
func TestRestartAPIServer(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cp.NodeClient("restart")
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "restart", metav1.GetOptions{}); err == nil || apierrors.IsNotFound(err) {
		t.Fatalf("request to a stopped API server: got %v, want a connection error", err)
	}
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// With a watch open, kube-apiserver still shuts down gracefully on SIGTERM
// (it ends the watch after a second) instead of waiting for SIGKILL after
// 5s, and the watch's client sees it end.
func TestStopAPIServerWithWatchOpen(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := cp.AdminClient().CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("StopAPIServer with a watch open took %v", took)
	if took > 4*time.Second {
		t.Errorf("StopAPIServer took %v: kube-apiserver did not end the watch and exit on SIGTERM", took)
	}
	select {
	case _, ok := <-w.ResultChan():
		for ok {
			_, ok = <-w.ResultChan()
		}
	case <-ctx.Done():
		t.Fatal("the watch did not end when the API server stopped")
	}
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
}

// A second control plane beside the package's: ExtraAPIServerArgs reach
// kube-apiserver, and after Stop (which may be repeated) nothing answers at
// its address.
func TestStartStop(t *testing.T) {
	controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	other, err := controlplane.Start(ctx, controlplane.Options{
		ExtraAPIServerArgs: map[string]string{"service-cluster-ip-range": "10.0.7.0/24"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Stop() }()
	if other.Host() == cp.Host() {
		t.Fatalf("two control planes at %s", cp.Host())
	}
	var svc *corev1.Service
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the kubernetes Service", func() bool {
		svc, err = other.AdminClient().CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil
	})
	if svc.Spec.ClusterIP != "10.0.7.1" {
		t.Errorf("kubernetes Service ClusterIP %s, want 10.0.7.1 from the extra flag", svc.Spec.ClusterIP)
	}
	if err := other.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := other.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := other.AdminClient().CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the stopped control plane still answers")
	}
}

// A kube-apiserver that exits at start-up fails Start at once (after a
// retry with new ports), with the end of its log in the error.
func TestStartFailsWhenAPIServerExits(t *testing.T) {
	controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	_, err := controlplane.Start(ctx, controlplane.Options{ExtraAPIServerArgs: map[string]string{"no-such-flag": "1"}})
	if err == nil {
		t.Fatal("Start with an unknown kube-apiserver flag succeeded")
	}
	for _, want := range []string{"attempt 3", "kube-apiserver exited", "no-such-flag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("Start took %v to notice that kube-apiserver exited", took)
	}
}
