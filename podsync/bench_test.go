package podsync

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// tenContainerPod is a running pod with 10 containers and its state.
func tenContainerPod() (*corev1.Pod, *PodState) {
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	pod := testPod(corev1.RestartPolicyAlways, names...)
	st := &PodState{Sandboxes: []*SandboxState{readySandbox()}}
	for _, n := range names {
		st.Containers = append(st.Containers, running(pod, n))
	}
	return pod, st
}

func BenchmarkComputePodActions(b *testing.B) {
	pod, st := tenContainerPod()
	in := PlanInput{Pod: pod, State: st, Now: t0}
	b.ReportAllocs()
	for b.Loop() {
		if a := ComputePodActions(in); !a.Empty() {
			b.Fatal("actions for a running pod")
		}
	}
}

func BenchmarkGeneratePodStatus(b *testing.B) {
	pod, st := tenContainerPod()
	in := StatusInput{Pod: pod, State: st, HostIPs: []string{"192.0.2.1"}, Now: t0}
	b.ReportAllocs()
	for b.Loop() {
		if s := GeneratePodStatus(in); s.Phase != corev1.PodRunning {
			b.Fatal(s.Phase)
		}
	}
}

// BenchmarkRelist relists 100 pods of 3 containers each on the in-memory
// runtime, the steady state (nothing changed since the last relist).
func BenchmarkRelist(b *testing.B) {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{})
	for p := range 100 {
		uid := fmt.Sprintf("uid-%d", p)
		sb, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: uid, Namespace: "default", Uid: uid},
			Labels:   map[string]string{LabelPodUID: uid, LabelPodName: uid, LabelPodNamespace: "default"},
		}, "")
		if err != nil {
			b.Fatal(err)
		}
		for c := range 3 {
			name := fmt.Sprintf("c%d", c)
			id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage},
				Labels: map[string]string{LabelPodUID: uid, LabelContainerName: name}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = rt.StartContainer(ctx, id)
		}
	}
	cri, err := NewCRI(CRIOptions{Runtime: rt, ResolvConf: "-"})
	if err != nil {
		b.Fatal(err)
	}
	var pods map[types.UID]*PodState
	b.ReportAllocs()
	for b.Loop() {
		if pods, err = cri.Relist(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if len(pods) != 100 || len(pods["uid-7"].Containers) != 3 {
		b.Fatalf("%d pods", len(pods))
	}
}

func BenchmarkHashContainer(b *testing.B) {
	c := &corev1.Container{Name: "app", Image: "registry.k8s.io/nginx:1.25"}
	b.ReportAllocs()
	for b.Loop() {
		_ = HashContainer(c)
	}
}
