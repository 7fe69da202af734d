package status_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/status"
)

// A pod's statuses written step by step: three statuses set at once are one
// patch, an unchanged status is no request, and once the pod's deletion
// began and its termination finished the writer deletes it.
func Example() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "web", UID: "0a1b2c",
			Annotations: map[string]string{podsource.ConfigSourceAnnotation: podsource.APISource},
		},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	client := fake.NewClientset(pod)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }, Clock: clk})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	ready := func(ok bool) corev1.PodCondition {
		c := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
		if ok {
			c.Status = corev1.ConditionTrue
		}
		return c
	}

	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodPending})
	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{ready(false)}})
	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{ready(true)}})
	_, _ = w.SyncOnce(ctx)
	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{ready(true)}})
	_, _ = w.SyncOnce(ctx)

	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	w.SetPodStatus(deleting, corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: []corev1.PodCondition{ready(true)}})
	w.PodTerminated(deleting)
	_, _ = w.SyncOnce(ctx)

	s, _ := w.Status(pod.UID)
	fmt.Println(s.Phase, s.Conditions[0].Type, s.Conditions[0].Status, s.Conditions[0].Reason)
	for _, a := range client.Actions() {
		fmt.Print(a.GetVerb(), " ")
	}
	fmt.Println()
	// Output:
	// Succeeded Ready False PodCompleted
	// patch patch delete
}
