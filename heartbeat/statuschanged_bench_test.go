package heartbeat_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/heartbeat"
)

// BenchmarkStatusChanged compares two equal kubelet-sized statuses (six
// conditions, 50 images of 5 names, capacity and allocatable): the check a
// Lease-strategy round makes on every pass.
func BenchmarkStatusChanged(b *testing.B) {
	s := &corev1.NodeStatus{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
		NodeInfo:  corev1.NodeSystemInfo{KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12", ContainerRuntimeVersion: "containerd://1.6.20"},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "n1"}},
	}
	s.Allocatable = s.Capacity.DeepCopy()
	for _, t := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "DiskUsageHigh", "NetworkUnavailable"} {
		s.Conditions = append(s.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "Fine", Message: "all fine", LastTransitionTime: metav1.Now()})
	}
	for i := range 50 {
		img := corev1.ContainerImage{SizeBytes: int64(1000 * (50 - i))}
		for j := range 5 {
			img.Names = append(img.Names, fmt.Sprintf("registry.example/image-%d:tag-%d", i, j))
		}
		s.Images = append(s.Images, img)
	}
	other := s.DeepCopy()
	b.ReportAllocs()
	for b.Loop() {
		if heartbeat.StatusChanged(s, other) {
			b.Fatal("equal statuses reported as changed")
		}
	}
}
