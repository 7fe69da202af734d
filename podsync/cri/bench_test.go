package cri

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

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
	cri, err := New(Options{Runtime: rt, ResolvConf: "-"})
	if err != nil {
		b.Fatal(err)
	}
	var pods map[types.UID]*podsync.PodState
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
