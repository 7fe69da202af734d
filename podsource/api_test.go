package podsource

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

func TestAPISourceFake(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	other := testPod("elsewhere", "uid-x")
	other.Spec.NodeName = "n2"
	client := fake.NewClientset(testPod("a", "uid-a"), other)
	src, err := NewAPI(APIOptions{Pods: client.CoreV1().Pods(metav1.NamespaceAll), NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMerger(MergerOptions{Sources: []PodSource{src}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	expectUpdate(t, m.Updates(), "ADD api [a/uid-a]")
	eventually(t, "source seen", m.SeenAllSources)

	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, testPod("b", "uid-b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectUpdate(t, m.Updates(), "ADD api [b/uid-b]")
	b := testPod("b", "uid-b")
	b.Status.Phase = "Running"
	if _, err := pods.UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectUpdate(t, m.Updates(), "RECONCILE api [b/uid-b]")
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectUpdate(t, m.Updates(), "REMOVE api [a/uid-a]")
}

func TestAPIOptions(t *testing.T) {
	if _, err := NewAPI(APIOptions{NodeName: "n"}); err == nil || !strings.Contains(err.Error(), "APIOptions.Pods") {
		t.Errorf("no client: %v", err)
	}
	if _, err := NewAPI(APIOptions{Pods: fake.NewClientset().CoreV1().Pods("")}); err == nil || !strings.Contains(err.Error(), "APIOptions.NodeName") {
		t.Errorf("no node name: %v", err)
	}
}
