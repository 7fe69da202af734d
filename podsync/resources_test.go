package podsync

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodekit/nodekit/internal/podres"
)

// A pod without resources gets what the sums give, without them; a pod
// with any is summed.
func TestPodResourcesWithoutAny(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	for name, spec := range map[string]corev1.PodSpec{
		"none": {Containers: []corev1.Container{{Name: "c"}}},
		"init and sidecar": {InitContainers: []corev1.Container{{Name: "i"}, {Name: "s", RestartPolicy: &always}},
			Containers: []corev1.Container{{Name: "c"}, {Name: "d"}}},
		"empty lists": {Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}},
		"a request":   {Containers: []corev1.Container{{Name: "c"}, {Name: "d", Resources: corev1.ResourceRequirements{Requests: one}}}},
		"a limit":     {InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Limits: one}}}, Containers: []corev1.Container{{Name: "c"}}},
		"pod-level":   {Resources: &corev1.ResourceRequirements{Requests: one}, Containers: []corev1.Container{{Name: "c"}}},
		"overhead":    {Overhead: one, Containers: []corev1.Container{{Name: "c"}}},
	} {
		pod := &corev1.Pod{Spec: spec}
		res, alloc := podResources(pod)
		opts := resourcehelper.PodResourcesOptions{}
		want := pod.Spec.Resources.DeepCopy()
		if want == nil {
			want = &corev1.ResourceRequirements{}
		}
		want.Requests, want.Limits = podres.Requests(pod, opts), podres.Limits(pod, opts)
		if !reflect.DeepEqual(res, want) || !reflect.DeepEqual(alloc, want.Requests) {
			t.Errorf("%s: got %v, %v; the sums give %v, %v", name, res, alloc, want, want.Requests)
		}
		if got, wantNone := noResources(pod), name == "none" || name == "init and sidecar" || name == "empty lists"; got != wantNone {
			t.Errorf("%s: noResources %v", name, got)
		}
	}
}
