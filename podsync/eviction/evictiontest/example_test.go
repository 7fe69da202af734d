package evictiontest_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/eviction/evictiontest"
)

// A disk filling up: the reclaimer (an image GC, say) frees only part of
// what is needed, so the manager evicts the pod using the most disk. The
// fakes record both.
func Example() {
	ctx := klog.NewContext(context.Background(), klog.Background().V(100)) // quiet
	const gi = 1 << 30
	obs := evictiontest.NewObserver(eviction.Snapshot{
		NodeFS: &eviction.FsStats{AvailableBytes: 2 * gi, CapacityBytes: 100 * gi},
		Pods:   []eviction.PodUsage{{UID: "a", LogsBytes: 5 * gi}, {UID: "b", VolumeBytes: 1 * gi}},
	})
	reclaimer := &evictiontest.Reclaimer{Func: func(context.Context, eviction.Signal) (uint64, error) {
		obs.Update(func(s *eviction.Snapshot) { s.NodeFS.AvailableBytes += 3 * gi })
		return 3 * gi, nil
	}}
	killer := &evictiontest.Killer{}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "b"}},
	}
	m, err := eviction.New(eviction.Options{
		NodeName:   "edge-1",
		Observer:   obs,
		ActivePods: func() []*corev1.Pod { return pods },
		Killer:     killer,
		Reclaimers: []eviction.Reclaimer{reclaimer},
	})
	if err != nil {
		panic(err)
	}
	if _, err := m.SyncOnce(ctx); err != nil {
		panic(err)
	}
	fmt.Println("reclaimed for:", reclaimer.Calls())
	fmt.Println("observations:", obs.Calls())
	for _, e := range killer.Evictions() {
		fmt.Println("evicted:", e.Pod.Name, e.Status.Reason)
	}
	// Output:
	// reclaimed for: [nodefs.available]
	// observations: 2
	// evicted: a Evicted
}
