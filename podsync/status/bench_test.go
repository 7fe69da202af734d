package status_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsync/status"
)

// A reconcile round over 1,000 pods whose statuses the API already has:
// what a hollow node or a full node pays every ReconcilePeriod.
func BenchmarkReconcileUnchanged(b *testing.B) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	w, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 1000 {
		p := apiPod(fmt.Sprint("pod-", i), types.UID(fmt.Sprint("uid-", i)))
		if err := client.Tracker().Add(p); err != nil {
			b.Fatal(err)
		}
		w.SetPodStatus(p, runningStatus(true))
	}
	if _, err := w.SyncOnce(ctx); err != nil {
		b.Fatal(err)
	}
	client.ClearActions()
	b.ReportAllocs()
	for b.Loop() {
		clk.Step(status.DefaultReconcilePeriod)
		if _, err := w.SyncOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(client.Actions()); n != 0 {
		b.Fatalf("%d requests for unchanged pods", n)
	}
}
