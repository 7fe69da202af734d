package nodekit_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
)

var cp *controlplane.ControlPlane // started by TestMain

// TestMain starts the test control plane and, for the pod half's tests,
// containerd (ctrd).
func TestMain(m *testing.M) {
	os.Exit(containerdtest.MainFunc(func() int { return controlplane.MainWith(m, &cp, controlplane.Options{Aggregator: true}) }, &ctrd))
}

// contentTypes records the Content-Type of each answer but watches'.
type contentTypes struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string]int
}

func (c *contentTypes) WrappedRoundTripper() http.RoundTripper { return c.next }

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil && !strings.Contains(r.URL.RawQuery, "watch=true") {
		c.mu.Lock()
		c.seen[r.Method+" "+resp.Header.Get("Content-Type")]++
		c.mu.Unlock()
	}
	return resp, err
}

// As the node itself (system:node:<name> under the Node authorizer and
// NodeRestriction), the client registers a Node, patches its status,
// watches it, keeps a Lease, lists the node's pods and records an event,
// all in protobuf, and API errors are what apierrors expects.
func TestIntegrationNodeIdentity(t *testing.T) {
	cp := controlplane.Need(t, cp)
	const name = "kubeclient-node"
	admin := cp.AdminClient()
	// The admin's clean-up runs after the goroutine check below (clean-ups
	// run last first): the admin's own connection is not the check's.
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admin.CoreV1().Events(metav1.NamespaceDefault).Delete(context.Background(), name+".1", metav1.DeleteOptions{})
		_ = admin.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: "runc"}
	if _, err := admin.NodeV1().RuntimeClasses().Create(context.Background(), rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	answers := &contentTypes{seen: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { answers.next = rt; return answers })
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leakcheck.CheckSettling(t, func() { utilnet.CloseIdleConnectionsFor(hc.Transport) }))
	c, err := nodekit.NewClientForHTTPClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	nodes := c.Nodes()
	created, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"x": "y"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Labels["x"] != "y" {
		t.Fatalf("created %+v", created.ObjectMeta)
	}
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want already exists", err)
	}

	w, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	patch := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	patched, err := nodes.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if len(patched.Status.Conditions) != 1 || patched.Status.Conditions[0].Reason != "KubeletReady" {
		t.Errorf("patched status %+v", patched.Status)
	}
	select {
	case e := <-w.ResultChan():
		n, ok := e.Object.(*corev1.Node)
		if e.Type != watch.Modified || !ok || n.ResourceVersion != patched.ResourceVersion {
			t.Errorf("watch event %s %T", e.Type, e.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	w.Stop()

	leases := c.Leases(corev1.NamespaceNodeLease)
	if _, err := leases.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("missing lease: %v, want not found", err)
	}
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	l, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: created.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Spec.RenewTime.Equal(&now) {
		t.Errorf("renewTime %v, want %v", l.Spec.RenewTime, now)
	}
	stale := l.DeepCopy()
	later := metav1.NewMicroTime(now.Add(time.Second))
	l.Spec.RenewTime = &later
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want conflict", err)
	}

	pods, err := c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 || pods.ResourceVersion == "" {
		t.Errorf("pods %+v", pods)
	}
	if _, err := c.Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list of every pod as the node: %v, want forbidden", err)
	}

	// RuntimeClasses: the node may get, list and watch them.
	classes := c.RuntimeClasses()
	list, err := classes.List(ctx, metav1.ListOptions{})
	if err != nil || list.ResourceVersion == "" || !slices.ContainsFunc(list.Items, func(r nodev1.RuntimeClass) bool { return r.Name == name && r.Handler == "runc" }) {
		t.Errorf("RuntimeClasses as the node: %v, %v", list, err)
	}
	if got, err := classes.Get(ctx, name, metav1.GetOptions{}); err != nil || got.Handler != "runc" {
		t.Errorf("RuntimeClass %s as the node: %v, %v", name, got, err)
	}
	rw, err := classes.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watching RuntimeClasses as the node: %v", err)
	}
	rw.Stop()

	ev, err := c.EventSink().Create(&corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + ".1", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: name, UID: created.UID},
		Reason:         "Testing", Message: "kubeclient", Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "kubelet", Host: name},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EventSink().Patch(ev, []byte(`{"count":2}`)); err != nil {
		t.Errorf("event patch: %v", err)
	}

	answers.mu.Lock()
	defer answers.mu.Unlock()
	for k, n := range answers.seen {
		if !strings.HasSuffix(k, nodekit.ContentTypeProtobuf) {
			t.Errorf("%d answers %q, want every answer in protobuf", n, k)
		}
	}
}
