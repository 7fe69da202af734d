package eviction_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/eviction/evictiontest"
)

// A node with 50Mi of memory left, under kubelet's default hard threshold
// of 100Mi: the pod using more than it requested is evicted, the node
// reports MemoryPressure, and new BestEffort pods are rejected.
func Example() {
	ctx := klog.NewContext(context.Background(), klog.Background().V(100)) // quiet
	const mi = 1 << 20
	pod := func(name, memRequest string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
		p.Spec.Containers = []corev1.Container{{Name: "app"}}
		if memRequest != "" {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memRequest)}
		}
		return p
	}
	pods := []*corev1.Pod{pod("web", "256Mi"), pod("batch", "64Mi")}
	observer := evictiontest.NewObserver(eviction.Snapshot{
		Memory: &eviction.MemoryStats{AvailableBytes: 50 * mi, WorkingSetBytes: 1998 * mi},
		Pods: []eviction.PodUsage{
			{UID: "uid-web", MemoryWorkingSetBytes: 200 * mi, Containers: []eviction.ContainerUsage{{Name: "app", MemoryWorkingSetBytes: 200 * mi}}},
			{UID: "uid-batch", MemoryWorkingSetBytes: 300 * mi, Containers: []eviction.ContainerUsage{{Name: "app", MemoryWorkingSetBytes: 300 * mi}}},
		},
	})
	killer := &evictiontest.Killer{}
	m, err := eviction.New(eviction.Options{
		NodeName:   "edge-1",
		Observer:   observer,
		ActivePods: func() []*corev1.Pod { return pods },
		Killer:     killer,
		Clock:      clocktesting.NewFakeClock(t0),
	})
	if err != nil {
		panic(err)
	}
	if _, err := m.SyncOnce(ctx); err != nil {
		panic(err)
	}
	for _, e := range killer.Evictions() {
		fmt.Printf("evicted %s (grace %ds): %q\n", e.Pod.Name, e.GracePeriod, e.Status.Message)
	}
	fmt.Println("conditions:", m.State().Conditions)
	r := m.Admit(pod("new", ""), nil)
	fmt.Printf("admit a BestEffort pod: %v %s %q\n", r.Admit, r.Reason, r.Message)
	// Output:
	// evicted batch (grace 1s): "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container app was using 300Mi, request is 64Mi, has larger consumption of memory. "
	// conditions: [MemoryPressure]
	// admit a BestEffort pod: false Evicted "The node had condition: [MemoryPressure]. "
}

// Kubelet's threshold syntax: hard and soft thresholds, grace periods and
// minimum reclaims, with errors that name the setting and the signal.
func ExampleParseThresholds() {
	ts, err := eviction.ParseThresholds(
		map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		map[string]string{"memory.available": "500Mi"},
		map[string]string{"memory.available": "1m30s"},
		map[string]string{"nodefs.available": "1Gi"},
	)
	if err != nil {
		panic(err)
	}
	for _, t := range ts {
		fmt.Println(t, "hard:", t.Hard(), "grace:", t.GracePeriod, "condition:", t.Signal.Condition())
	}
	_, err = eviction.ParseThresholds(nil, map[string]string{"nodefs.available": "20%"}, nil, nil)
	fmt.Println(err)
	// Output:
	// memory.available<100Mi hard: true grace: 0s condition: MemoryPressure
	// nodefs.available<10% hard: true grace: 0s condition: DiskPressure
	// memory.available<500Mi hard: false grace: 1m30s condition: MemoryPressure
	// eviction: evictionSoft["nodefs.available"]: grace period must be specified for the soft eviction threshold in evictionSoftGracePeriod
}

// A stats Summary (as nodestatus/usage publishes it and /stats/summary
// serves it) as the Snapshot the manager observes: the image file system
// is larger than the node's, so it is a dedicated one.
func ExampleFromSummary() {
	u := func(v uint64) *uint64 { return &v }
	summary := &statsapi.Summary{
		Node: statsapi.NodeStats{
			Memory:  &statsapi.MemoryStats{AvailableBytes: u(50 * Mi), WorkingSetBytes: u(1998 * Mi)},
			Fs:      &statsapi.FsStats{AvailableBytes: u(5 * Gi), CapacityBytes: u(50 * Gi)},
			Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{AvailableBytes: u(80 * Gi), CapacityBytes: u(100 * Gi)}},
		},
		Pods: []statsapi.PodStats{{
			PodRef:     statsapi.PodReference{Namespace: "default", Name: "web", UID: "uid-web"},
			Memory:     &statsapi.MemoryStats{WorkingSetBytes: u(200 * Mi)},
			Containers: []statsapi.ContainerStats{{Name: "app", Rootfs: &statsapi.FsStats{UsedBytes: u(10 * Mi)}}},
		}},
	}
	s := eviction.FromSummary(t0, summary)
	fmt.Printf("memory: %dMi available of %dMi\n", s.Memory.AvailableBytes/Mi, (s.Memory.AvailableBytes+s.Memory.WorkingSetBytes)/Mi)
	fmt.Printf("nodefs: %dGi free, imagefs: %dGi free, dedicated: %v\n", s.NodeFS.AvailableBytes/Gi, s.ImageFS.AvailableBytes/Gi, s.DedicatedImageFS)
	fmt.Printf("pids observed: %v\n", s.PIDs != nil)
	for _, p := range s.Pods {
		fmt.Printf("pod %s: %dMi memory, %dMi rootfs\n", p.UID, p.MemoryWorkingSetBytes/Mi, p.RootfsBytes/Mi)
	}
	// Output:
	// memory: 50Mi available of 2048Mi
	// nodefs: 5Gi free, imagefs: 80Gi free, dedicated: true
	// pids observed: false
	// pod uid-web: 200Mi memory, 10Mi rootfs
}
