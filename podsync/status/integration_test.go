package status_test

import (
	"context"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/status"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m, &cp)) }

// nodeClient registers the Node name as the node itself and returns a
// client with the node's identity whose requests are counted.
func nodeClient(t *testing.T, name string) (kubernetes.Interface, *corev1.Node, *testenv.APICounter) {
	t.Helper()
	cp := controlplane.Need(t, cp)
	cfg, err := cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	c := &testenv.APICounter{}
	cfg.WrapTransport = c.Wrap
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.AdminClient().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	c.Take()
	return client, node, c
}

// One pod's life as system:node:<name> under NodeRestriction: Pending,
// Running, Ready, a graceful delete by an admin, the terminal status, and
// the final delete. It counts the writer's requests and their bytes.
func TestIntegrationLifecycle(t *testing.T) {
	const node = "podstatus-n1"
	client, _, count := nodeClient(t, node)
	admin := cp.AdminClient()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	w, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	pod := apiPod("web", "")
	pod.Spec.NodeName = node
	pod.Status = corev1.PodStatus{}
	pod, err = admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API source's copy: what the node knows of the pod.
	informer := func() *corev1.Pod {
		t.Helper()
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[podsource.ConfigSourceAnnotation] = podsource.APISource
		return p
	}
	var sent []string
	var total int64
	step := func(what string, p *corev1.Pod, s *corev1.PodStatus) {
		t.Helper()
		if s != nil {
			w.SetPodStatus(p, *s)
		} else {
			w.PodTerminated(p)
		}
		if _, err := w.SyncOnce(ctx); err != nil {
			t.Fatalf("%s: SyncOnce: %v", what, err)
		}
		c := count.Take()
		t.Logf("%s: %v, %d bytes", what, c.Log, c.RequestBytes)
		sent = append(sent, c.Log...)
		total += c.RequestBytes
	}
	pending, running, ready, done := pendingStatus(), runningStatus(false), runningStatus(true), succeededStatus()
	step("pending", pod, &pending)
	step("running", pod, &running)
	step("ready", pod, &ready)
	if got := informer().Status; got.Phase != corev1.PodRunning || !got.ContainerStatuses[0].Ready {
		t.Fatalf("API status %+v", got)
	}

	grace := int64(30)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	deleting := informer()
	if deleting.DeletionTimestamp == nil {
		t.Fatal("no deletion timestamp after a graceful delete")
	}
	step("deletion seen", deleting, &ready)
	step("terminal", deleting, &done)
	if got := informer().Status.Phase; got != corev1.PodSucceeded {
		t.Fatalf("API phase %q, want Succeeded", got)
	}
	step("terminated", deleting, nil)
	if _, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still in the API after the final delete: %v", err)
	}

	t.Logf("lifecycle: %d requests, %d bytes of request bodies: %v", len(sent), total, sent)
	if len(sent) != 5 {
		t.Errorf("%d requests, want 5 (4 status patches and the final delete): %v", len(sent), sent)
	}
	if total > 3*1024 {
		t.Errorf("%d bytes of request bodies, want at most 3 KiB", total)
	}
	if got := requests(t, reg); got["patch"] != 4 || got["delete"] != 1 || got["get"]+got["list"] != 0 {
		t.Errorf("%s %v", status.MetricRequests, got)
	}
}

// A static pod's status goes to its mirror pod, made by the node as
// podsource's MirrorPods makes it.
func TestIntegrationMirrorPod(t *testing.T) {
	const node = "podstatus-n2"
	client, n, count := nodeClient(t, node)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	w, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	static, mirror := staticPod("kube-thing-" + node)
	static.Spec.NodeName, mirror.Spec.NodeName = node, node
	mirror.UID, mirror.Status = "", corev1.PodStatus{}
	controller := true
	mirror.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID, Controller: &controller}}

	// No mirror pod yet: nothing written.
	s := runningStatus(true)
	w.SetPodStatus(static, s)
	if _, err := w.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if r := count.Take().Log; len(r) != 1 {
		t.Errorf("without a mirror pod: %v, want one read", r)
	}
	// Why the read is a LIST: a node's GET of a pod that does not exist is
	// Forbidden, not NotFound.
	if _, err := client.CoreV1().Pods("default").Get(ctx, static.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node's GET of a missing pod: %v, want Forbidden", err)
	}
	count.Take()

	created, err := client.CoreV1().Pods("default").Create(ctx, mirror, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the mirror pod as the node: %v", err)
	}
	count.Take()
	// The lookup is retried after its back-off, and finds the mirror pod.
	clk.Step(status.DefaultRetryBackoff)
	if _, err := w.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	c := count.Take()
	r := c.Log
	t.Logf("mirror pod: %v, %d bytes", r, c.RequestBytes)
	if len(r) != 2 {
		t.Errorf("requests %v, want a LIST (the read) and a PATCH", r)
	}
	got, err := cp.AdminClient().CoreV1().Pods("default").Get(ctx, static.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || got.Status.Phase != corev1.PodRunning || !got.Status.ContainerStatuses[0].Ready {
		t.Errorf("mirror pod %s status %+v", got.UID, got.Status)
	}
	// Terminated static pods are not deleted, nor their mirror pods.
	w.PodTerminated(static)
	if _, err := w.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.AdminClient().CoreV1().Pods("default").Get(ctx, static.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("mirror pod after PodTerminated: %v", err)
	}
}

// A pod deleted and recreated under the same name is never written: the
// patch's UID precondition fails, and the writer finds the other UID.
func TestIntegrationRecreatedPod(t *testing.T) {
	const node = "podstatus-n3"
	client, _, count := nodeClient(t, node)
	admin := cp.AdminClient()
	ctx := context.Background()
	w, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }})
	if err != nil {
		t.Fatal(err)
	}
	create := func() *corev1.Pod {
		t.Helper()
		p := apiPod("again", "")
		p.Spec.NodeName, p.Status = node, corev1.PodStatus{}
		p, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := create()
	running := runningStatus(false)
	w.SetPodStatus(old, running)
	if _, err := w.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "again", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	fresh := create()
	count.Take()
	ready := runningStatus(true)
	w.SetPodStatus(old, ready)
	if _, err := w.SyncOnce(ctx); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	r := count.Take().Log
	t.Logf("recreated pod: %v", r)
	if len(r) != 2 {
		t.Errorf("requests %v, want the refused PATCH and a read", r)
	}
	got, err := admin.CoreV1().Pods("default").Get(ctx, "again", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != fresh.UID || got.Status.Phase != corev1.PodPending || len(got.Status.ContainerStatuses) != 0 {
		t.Errorf("the new pod was written: %+v", got.Status)
	}
	// Nothing more for the old UID.
	w.SetPodStatus(old, running)
	if _, err := w.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if r := count.Take().Log; len(r) != 0 {
		t.Errorf("requests for a replaced pod: %v", r)
	}
}
