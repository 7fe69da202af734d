package eviction_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsync/eviction"
)

// BenchmarkSyncOnce110Pods: one SyncOnce on a node with 110 pods (kubelet's
// maxPods), each with a container and usage. "pressure": memory.available
// is under its hard threshold, so every sync ranks the pods and evicts one
// (the killer does nothing, so the same pods stay); "none": no threshold
// is met (the common case).
func BenchmarkSyncOnce110Pods(b *testing.B) {
	pods := make([]*corev1.Pod, 110)
	usage := make([]eviction.PodUsage, 110)
	for i := range pods {
		name := fmt.Sprintf("pod-%03d", i)
		pods[i] = newPod(name, request(corev1.ResourceMemory, "64Mi"), priority(int32(i%3)))
		usage[i] = memUsage(name, uint64(32+i)*Mi)
	}
	for _, bc := range []struct {
		name  string
		avail uint64
	}{{"pressure", 50 * Mi}, {"none", 4 * Gi}} {
		b.Run(bc.name, func(b *testing.B) {
			snap := &eviction.Snapshot{
				Memory: memory(bc.avail, 8*Gi),
				NodeFS: &eviction.FsStats{AvailableBytes: 50 * Gi, CapacityBytes: 100 * Gi, InodesFree: 5e6, Inodes: 6e6},
				PIDs:   &eviction.PIDStats{MaxPID: 1 << 22, Running: 2000},
				Pods:   usage,
			}
			m, err := eviction.New(eviction.Options{
				NodeName:   "node-1",
				Observer:   eviction.ObserverFunc(func(context.Context) (*eviction.Snapshot, error) { return snap, nil }),
				ActivePods: func() []*corev1.Pod { return pods },
				Killer: eviction.KillerFunc(func(context.Context, *corev1.Pod, corev1.PodStatus, int64) error {
					return nil
				}),
				Clock: clocktesting.NewFakeClock(t0),
			})
			if err != nil {
				b.Fatal(err)
			}
			// Logging off: the two Info lines of an eviction through klog's
			// default text logger cost more than the sync itself.
			ctx := klog.NewContext(context.Background(), klog.Background().V(100))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.SyncOnce(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
