package podsync_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsync"
)

// tenContainerPod is a running pod with 10 containers and its state.
func tenContainerPod() (*corev1.Pod, *podsync.PodState) {
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	pod := testPod(corev1.RestartPolicyAlways, names...)
	st := &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}}
	for _, n := range names {
		st.Containers = append(st.Containers, running(pod, n))
	}
	return pod, st
}

func BenchmarkComputePodActions(b *testing.B) {
	pod, st := tenContainerPod()
	in := podsync.PlanInput{Pod: pod, State: st, Now: t0}
	b.ReportAllocs()
	for b.Loop() {
		if a := podsync.ComputePodActions(in); !a.Empty() {
			b.Fatal("actions for a running pod")
		}
	}
}

func BenchmarkGeneratePodStatus(b *testing.B) {
	pod, st := tenContainerPod()
	in := podsync.StatusInput{Pod: pod, State: st, HostIPs: []string{"192.0.2.1"}, Now: t0}
	b.ReportAllocs()
	for b.Loop() {
		if s := podsync.GeneratePodStatus(in); s.Phase != corev1.PodRunning {
			b.Fatal(s.Phase)
		}
	}
}

func BenchmarkHashContainer(b *testing.B) {
	c := &corev1.Container{Name: "app", Image: "registry.k8s.io/nginx:1.25"}
	b.ReportAllocs()
	for b.Loop() {
		_ = podsync.HashContainer(c)
	}
}
