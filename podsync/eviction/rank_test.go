package eviction_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/eviction"
)

func TestRank(t *testing.T) {
	memPods := []*corev1.Pod{
		newPod("a", request(corev1.ResourceMemory, "100Mi")),
		newPod("b", request(corev1.ResourceMemory, "100Mi")),
		newPod("c"),
		newPod("d", priority(1000)),
		newPod("e"),
	}
	memSnap := &eviction.Snapshot{Pods: []eviction.PodUsage{
		memUsage("a", 50*Mi), memUsage("b", 200*Mi), memUsage("c", 150*Mi), memUsage("d", 300*Mi),
	}}
	diskPods := []*corev1.Pod{
		newPod("a", request(corev1.ResourceEphemeralStorage, "1Gi")),
		newPod("b"),
		newPod("c"),
		newPod("d", priority(-10)),
	}
	disk := []eviction.PodUsage{
		diskUsage("a", 500*Mi, 0, 0), diskUsage("b", 100*Mi, 50*Mi, 0),
		diskUsage("c", 0, 0, 400*Mi), diskUsage("d", 10*Mi, 0, 0),
	}
	pidPods := []*corev1.Pod{newPod("a"), newPod("b"), newPod("c", priority(-1)), newPod("d")}
	pidSnap := &eviction.Snapshot{Pods: []eviction.PodUsage{
		{UID: "a", Processes: 10}, {UID: "b", Processes: 50}, {UID: "c", Processes: 1},
	}}
	tests := []struct {
		name   string
		pods   []*corev1.Pod
		signal eviction.Signal
		snap   *eviction.Snapshot
		want   []string
	}{
		// e has no stats; c and b exceed their requests at priority 0 (c by
		// more); d exceeds at a higher priority; a is within its request.
		{"memory", memPods, eviction.SignalMemoryAvailable, memSnap, []string{"e", "c", "b", "d", "a"}},
		{"allocatable memory", memPods, eviction.SignalAllocatableMemoryAvailable, memSnap, []string{"e", "c", "b", "d", "a"}},
		// Everything counts on a shared file system: d exceeds at the
		// lowest priority, then c (400Mi) and b (150Mi); a is within 1Gi.
		{"nodefs", diskPods, eviction.SignalNodeFsAvailable, &eviction.Snapshot{Pods: disk}, []string{"d", "c", "b", "a"}},
		{"imagefs shared", diskPods, eviction.SignalImageFsAvailable, &eviction.Snapshot{Pods: disk}, []string{"d", "c", "b", "a"}},
		// A dedicated imagefs counts writable layers only: c uses none of it.
		{"imagefs dedicated", diskPods, eviction.SignalImageFsAvailable, &eviction.Snapshot{Pods: disk, DedicatedImageFS: true}, []string{"d", "b", "c", "a"}},
		// ... and nodefs then counts logs and volumes only.
		{"nodefs with dedicated imagefs", diskPods, eviction.SignalNodeFsAvailable, &eviction.Snapshot{Pods: disk, DedicatedImageFS: true}, []string{"c", "b", "d", "a"}},
		// Inodes have no request: any use exceeds; then priority, then use.
		{"nodefs inodes", diskPods, eviction.SignalNodeFsInodesFree, &eviction.Snapshot{Pods: disk}, []string{"d", "a", "c", "b"}},
		// Priority first, then processes (d has no stats: first of its priority).
		{"pids", pidPods, eviction.SignalPIDAvailable, pidSnap, []string{"c", "d", "b", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := slices.Clone(tt.pods)
			eviction.Rank(pods, tt.signal, tt.snap)
			if got := names(pods); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsCritical(t *testing.T) {
	mirror := newPod("m")
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": "hash"}
	api := newPod("api")
	api.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
	for _, tt := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{newPod("plain"), false},
		{api, false},
		{newPod("static", static()), true},
		{mirror, true},
		{newPod("node-critical", priority(2000001000)), true},
		{newPod("cluster-critical", priority(2000000000)), true},
		{newPod("high", priority(1999999999)), false},
	} {
		if got := admission.IsCritical(tt.pod); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.pod.Name, got, tt.want)
		}
	}
}

// The requests ranking compares are the scheduler's: sidecars, the largest
// init container, overhead, and pod-level requests when set.
func TestRankRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	mk := func(name string, edit func(*corev1.Pod)) *corev1.Pod {
		p := newPod(name, request(corev1.ResourceMemory, "100Mi"))
		edit(p)
		return p
	}
	req := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
	}
	pods := []*corev1.Pod{
		// 100Mi + 100Mi sidecar = 200Mi: 250Mi exceeds it by 50Mi.
		mk("sidecar", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: req("100Mi")}}
		}),
		// An init container of 240Mi: 250Mi exceeds it by 10Mi.
		mk("init", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: req("240Mi")}} }),
		// 100Mi + 120Mi overhead: exceeded by 30Mi.
		mk("overhead", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("120Mi")}
		}),
		// Pod-level 1Gi: not exceeded.
		mk("pod-level", func(p *corev1.Pod) { r := req("1Gi"); p.Spec.Resources = &r }),
		// 100Mi: exceeded by 150Mi.
		mk("plain", func(*corev1.Pod) {}),
	}
	snap := &eviction.Snapshot{}
	for _, p := range pods {
		snap.Pods = append(snap.Pods, memUsage(string(p.UID), 250*Mi))
	}
	eviction.Rank(pods, eviction.SignalMemoryAvailable, snap)
	if got, want := names(pods), []string{"plain", "sidecar", "overhead", "init", "pod-level"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
