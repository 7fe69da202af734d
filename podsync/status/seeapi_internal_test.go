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
