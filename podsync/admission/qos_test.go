package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rr builds requirements from "name=quantity" pairs for requests and limits.
func rr(requests, limits map[corev1.ResourceName]string) corev1.ResourceRequirements {
	list := func(m map[corev1.ResourceName]string) corev1.ResourceList {
		if m == nil {
			return nil
		}
		l := corev1.ResourceList{}
		for n, q := range m {
			l[n] = resource.MustParse(q)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}
}

type res = map[corev1.ResourceName]string

const (
	cpu = corev1.ResourceCPU
	mem = corev1.ResourceMemory
)

func TestQOSClass(t *testing.T) {
	both := res{cpu: "1", mem: "1Gi"}
	guaranteed := rr(both, both)
	burstable := rr(res{cpu: "500m", mem: "1Gi"}, both)
	none := corev1.ResourceRequirements{}
	podLevel := func(r corev1.ResourceRequirements) *corev1.ResourceRequirements { return &r }
	cases := []struct {
		name       string
		init, main []corev1.ResourceRequirements
		pod        *corev1.ResourceRequirements
		status     corev1.PodQOSClass
		want       corev1.PodQOSClass
	}{
		{name: "nothing set", main: []corev1.ResourceRequirements{none, none}, want: corev1.PodQOSBestEffort},
		{name: "no containers", want: corev1.PodQOSBestEffort},
		{name: "zero requests and limits", main: []corev1.ResourceRequirements{rr(res{cpu: "0", mem: "0"}, res{cpu: "0", mem: "0"})}, want: corev1.PodQOSBestEffort},
		{name: "only other resources", main: []corev1.ResourceRequirements{rr(res{"ephemeral-storage": "1Gi"}, res{"ephemeral-storage": "1Gi"})}, want: corev1.PodQOSBestEffort},
		{name: "equal requests and limits", main: []corev1.ResourceRequirements{guaranteed, guaranteed}, want: corev1.PodQOSGuaranteed},
		{name: "limits only, requests defaulted to them", main: []corev1.ResourceRequirements{rr(nil, both)}, want: corev1.PodQOSGuaranteed},
		{name: "request below limit", main: []corev1.ResourceRequirements{burstable}, want: corev1.PodQOSBurstable},
		{name: "requests only", main: []corev1.ResourceRequirements{rr(both, nil)}, want: corev1.PodQOSBurstable},
		{name: "cpu only guaranteed", main: []corev1.ResourceRequirements{rr(res{cpu: "1"}, res{cpu: "1"})}, want: corev1.PodQOSBurstable},
		{name: "memory only guaranteed", main: []corev1.ResourceRequirements{rr(res{mem: "1Gi"}, res{mem: "1Gi"})}, want: corev1.PodQOSBurstable},
		{name: "zero limit with request", main: []corev1.ResourceRequirements{rr(both, res{cpu: "0", mem: "0"})}, want: corev1.PodQOSBurstable},
		{name: "guaranteed and best-effort containers", main: []corev1.ResourceRequirements{guaranteed, none}, want: corev1.PodQOSBurstable},
		{name: "best-effort init, guaranteed main", init: []corev1.ResourceRequirements{none}, main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSBurstable},
		{name: "guaranteed init and main", init: []corev1.ResourceRequirements{guaranteed}, main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSGuaranteed},
		{name: "burstable init, guaranteed main", init: []corev1.ResourceRequirements{burstable}, main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSBurstable},
		{name: "requests only on init", init: []corev1.ResourceRequirements{rr(res{cpu: "100m"}, nil)}, main: []corev1.ResourceRequirements{none}, want: corev1.PodQOSBurstable},
		{name: "status wins", main: []corev1.ResourceRequirements{none}, status: corev1.PodQOSGuaranteed, want: corev1.PodQOSGuaranteed},
		{name: "pod-level guaranteed over best-effort containers", pod: podLevel(guaranteed), main: []corev1.ResourceRequirements{none, none}, want: corev1.PodQOSGuaranteed},
		{name: "pod-level limits only, over burstable containers", pod: podLevel(rr(nil, both)), main: []corev1.ResourceRequirements{burstable}, want: corev1.PodQOSGuaranteed},
		{name: "pod-level burstable over guaranteed containers", pod: podLevel(burstable), init: []corev1.ResourceRequirements{guaranteed}, main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSBurstable},
		{name: "pod-level requests only", pod: podLevel(rr(both, nil)), main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSBurstable},
		{name: "pod-level cpu only", pod: podLevel(rr(res{cpu: "1"}, res{cpu: "1"})), main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSBurstable},
		{name: "pod-level hugepages only", pod: podLevel(rr(res{"hugepages-2Mi": "2Mi"}, res{"hugepages-2Mi": "2Mi"})), main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSBestEffort},
		{name: "empty pod-level resources", pod: podLevel(none), main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSGuaranteed},
		{name: "pod-level unsupported resource only", pod: podLevel(rr(res{"ephemeral-storage": "1Gi"}, nil)), main: []corev1.ResourceRequirements{guaranteed}, want: corev1.PodQOSGuaranteed},
	}
	containers := func(rs []corev1.ResourceRequirements) []corev1.Container {
		var cs []corev1.Container
		for _, r := range rs {
			cs = append(cs, corev1.Container{Name: "c", Resources: r})
		}
		return cs
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				Spec:   corev1.PodSpec{InitContainers: containers(tc.init), Containers: containers(tc.main), Resources: tc.pod},
				Status: corev1.PodStatus{QOSClass: tc.status},
			}
			if got := QOSClass(pod); got != tc.want {
				t.Errorf("QOSClass = %s, want %s", got, tc.want)
			}
		})
	}
}
