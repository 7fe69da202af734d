package nodekit_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodekit/nodekit/internal/testenv"
)

// TestIntegrationRuntimeClass: the pod half reads RuntimeClasses as the
// node (Client.API's RuntimeClasses, one list-and-watch) and the CRI
// backend runs a pod's sandbox on its class's handler; a class whose
// handler the runtime lacks leaves the pod Pending, its container
// ContainerCreating, with the kubelet's FailedCreatePodSandBox event in
// the API.
func TestIntegrationRuntimeClass(t *testing.T) {
	h := startPodHalf(t, "podsync-runtimeclass", podHalfOptions{})
	ctx := context.Background()
	classes := h.admin.NodeV1().RuntimeClasses()
	for name, handler := range map[string]string{"rc-runc": "runc", "rc-none": "no-such-handler"} {
		if _, err := classes.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = classes.Delete(ctx, name, metav1.DeleteOptions{}) })
	}
	runs := h.pod("rc-runs", "trap 'exit 0' TERM; sleep 3600 & wait")
	runs.Spec.RuntimeClassName = new("rc-runc")
	h.create(runs)
	p := h.waitPod("default", "rc-runs", "Running", 60*time.Second, func(p *corev1.Pod, _ bool) bool {
		return p != nil && p.Status.Phase == corev1.PodRunning
	})
	sbs, err := h.rt.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 1 || sbs[0].RuntimeHandler != "runc" {
		t.Errorf("sandboxes %v, %v", sbs, err)
	}
	h.deleteAndWaitGone(p, 0)

	stuck := h.pod("rc-stuck", "sleep 3600")
	stuck.Spec.RuntimeClassName = new("rc-none")
	h.create(stuck)
	want := `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "no-such-handler" is configured`
	sel := fields.Set{"involvedObject.name": "rc-stuck", "reason": "FailedCreatePodSandBox"}.AsSelector().String()
	var last []corev1.Event
	testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "FailedCreatePodSandBox event", func() bool {
		l, err := h.admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false
		}
		last = l.Items
		for _, e := range l.Items {
			if e.Message == want && e.Type == corev1.EventTypeWarning && e.Source.Host == "podsync-runtimeclass" {
				return true
			}
		}
		return false
	})
	p = h.waitPod("default", "rc-stuck", "Pending, ContainerCreating", 30*time.Second, func(p *corev1.Pod, _ bool) bool {
		return p != nil && p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Waiting != nil && p.Status.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating"
	})
	if len(last) == 0 {
		t.Error("no event")
	}
	h.deleteAndWaitGone(p, 0)
}
