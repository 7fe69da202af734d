package podsource

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
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
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "source seen", m.SeenAllSources)

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
	if _, err := NewAPI(APIOptions{Pods: fake.NewClientset().CoreV1().Pods(""), NodeName: "n", MaxRetryWait: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "APIOptions.MaxRetryWait") {
		t.Errorf("MaxRetryWait 1ms: %v", err)
	}
}

// failingPods fails every List, recording when.
type failingPods struct{ lists chan time.Time }

func (f failingPods) List(context.Context, metav1.ListOptions) (*v1.PodList, error) {
	f.lists <- time.Now()
	return nil, errors.New("connection refused")
}

func (f failingPods) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("connection refused")
}

// While the API server is away the source lists again at most
// MaxRetryWait after each failure, however long the outage, so that once
// it is back a pod deleted meanwhile is seen within MaxRetryWait.
// client-go times these waits on the real clock whatever the reflector's
// Clock, so this test watches real time: 8s with MaxRetryWait 1s (client-go's
// own back-off would list 4 times in 8s, 3.2s to 6.4s apart at the end).
func TestAPIRetriesWithinMaxRetryWait(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	pods := failingPods{lists: make(chan time.Time, 1000)}
	src, err := NewAPI(APIOptions{Pods: pods, NodeName: "n1", MaxRetryWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = src.Run(ctx, make(chan Update, 1))
	}()
	var times []time.Time
	end := time.After(8 * time.Second)
	for collecting := true; collecting; {
		select {
		case at := <-pods.lists:
			times = append(times, at)
		case <-end:
			collecting = false
		}
	}
	cancel()
	<-done
	if len(times) < 6 {
		t.Fatalf("%d lists in 8s of failures; want at least 6", len(times))
	}
	for i := 1; i < len(times); i++ {
		// A second, and as much again for a busy machine.
		if g := times[i].Sub(times[i-1]); g > 2*time.Second {
			t.Errorf("list %d came %v after the one before; want about 1s at most", i+1, g)
		}
	}
}
