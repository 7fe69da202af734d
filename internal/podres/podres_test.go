package podres

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// A pod with pod-level resources in decimal form and an overhead keeps its
// spec however often its sums are taken, and the sums include the overhead.
func TestPodUnchanged(t *testing.T) {
	mem := resource.MustParse("1.5Gi") // a fraction: held as a decimal
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c"}},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: mem},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: mem},
			},
			Overhead: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
		},
	}
	want := resource.MustParse("1636Mi") // 1.5Gi + 100Mi
	for i := 0; i < 3; i++ {
		if got := Requests(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceMemory]; got.Cmp(want) != 0 {
			t.Fatalf("call %d: requests %v, want %v", i, got.String(), want.String())
		}
		if got := Limits(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceMemory]; got.Cmp(want) != 0 {
			t.Fatalf("call %d: limits %v, want %v", i, got.String(), want.String())
		}
	}
	for _, q := range []resource.Quantity{pod.Spec.Resources.Requests[corev1.ResourceMemory], pod.Spec.Resources.Limits[corev1.ResourceMemory]} {
		if q.Cmp(mem) != 0 {
			t.Fatalf("the pod's own pod-level memory became %v, want %v", q.String(), mem.String())
		}
	}
}
