package status

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// The writer keeps one copy of a pod's API status: after its patch, the
// caller's copy of the version written (SeeAPIPod, or a copy handed in
// while the patch was in flight) replaces the writer's copy of the reply,
// and the pod stays synced.
func TestOneCopyOfTheAPIStatus(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1", ResourceVersion: "1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	client := fake.NewClientset(pod)
	w, err := New(Options{Pods: func(ns string) PodClient { return client.CoreV1().Pods(ns) },
		Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.2"})
	if _, err := w.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := w.pods["uid-1"]
	reply := st.api
	if reply == nil || reply.Status.PodIP != "10.0.0.2" || !st.upToDate() {
		t.Fatalf("after the patch: api %+v, up to date %v", reply, st.upToDate())
	}
	echo, err := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.SeeAPIPod(echo)
	if st.api != echo || !st.upToDate() {
		t.Errorf("after the echo: kept the echo %v, up to date %v", st.api == echo, st.upToDate())
	}
	if _, dirty := w.dirty["uid-1"]; dirty {
		t.Error("the echo made the pod due")
	}
}

// Once the API shows what the writer wrote, the node's status is the API
// copy's own (one status held per pod, not two); a copy that differs
// leaves the writer's.
func TestTheNodeStatusSharesTheAPICopy(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1", ResourceVersion: "1"},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	client := fake.NewClientset(pod)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := New(Options{Pods: func(ns string) PodClient { return client.CoreV1().Pods(ns) }, Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(now)
	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.2", StartTime: &started,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}})
	if _, err := w.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := w.pods["uid-1"]
	shares := func(api *corev1.Pod) bool {
		return st.status == &api.Status
	}
	if !shares(st.api) {
		t.Errorf("after the patch, the node's status is a copy of its own: %+v", st.status)
	}
	echo, err := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.SeeAPIPod(echo)
	if !shares(echo) || !st.upToDate() {
		t.Errorf("after the echo: shares it %v, up to date %v", shares(echo), st.upToDate())
	}

	// Another writer's change: the node's status stays its own, and the
	// pod is written again.
	other := echo.DeepCopy()
	other.ResourceVersion = "100"
	other.Status.PodIP = "10.9.9.9"
	w.SeeAPIPod(other)
	if shares(other) || st.status.PodIP != "10.0.0.2" {
		t.Errorf("the node's status took another writer's: %+v", st.status)
	}
	if _, dirty := w.dirty["uid-1"]; !dirty {
		t.Error("a changed API copy did not make the pod due")
	}
}
