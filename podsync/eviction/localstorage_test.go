package eviction_test

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podsync/eviction"
)

func ephemeralLimit(q string) podOpt {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse(q)
	}
}

func emptyDir(name, sizeLimit string) podOpt {
	return func(p *corev1.Pod) {
		v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
		if sizeLimit != "" {
			q := resource.MustParse(sizeLimit)
			v.EmptyDir.SizeLimit = &q
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v)
	}
}

func withVolume(u eviction.PodUsage, name string, bytes uint64) eviction.PodUsage {
	u.Volumes = map[string]uint64{name: bytes}
	u.VolumeBytes += bytes
	return u
}

// Pods over a local storage limit are evicted at once, all in one sync,
// with kubelet's messages and no DisruptionTarget condition, without any
// node signal met: an emptyDir over its sizeLimit, a pod over its
// containers' ephemeral-storage limits (volumes included), a container
// over its own (logs and writable layer); pods within their limits, pods
// without limits and critical pods are not.
func TestLocalStorageLimits(t *testing.T) {
	second := func(limit string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}}})
		}
	}
	snap := eviction.Snapshot{
		Memory: memory(2*Gi, 2*Gi), // no signal met
		Pods: []eviction.PodUsage{
			withVolume(diskUsage("scratch-over", 0, 0, 0), "scratch", 200*Mi),
			withVolume(diskUsage("scratch-within", 0, 0, 0), "scratch", 50*Mi),
			withVolume(diskUsage("pod-over", 5*Mi, 5*Mi, 0), "cache", 15*Mi), // 25Mi > 10Mi+10Mi; each container within
			diskUsage("container-over", 30*Mi, 2*Mi, 0),
			diskUsage("container-within", 5*Mi, 2*Mi, 0),
			diskUsage("no-limit", 500*Mi, 500*Mi, 0),
			diskUsage("critical", 30*Mi, 2*Mi, 0),
		},
	}
	f := newFixture(t, eviction.Options{}, snap,
		newPod("scratch-over", emptyDir("scratch", "100Mi")),
		newPod("scratch-within", emptyDir("scratch", "100Mi")),
		newPod("pod-over", ephemeralLimit("10Mi"), second("10Mi"), emptyDir("cache", "")),
		// Over its own 20Mi, within the pod's 120Mi (a pod of one
		// container over its limit is over the pod's first, as under
		// kubelet).
		newPod("container-over", ephemeralLimit("20Mi"), second("100Mi")),
		newPod("container-within", ephemeralLimit("20Mi")),
		newPod("no-limit"),
		newPod("critical", ephemeralLimit("20Mi"), static()),
	)
	f.sync(t)
	want := map[string]string{
		"scratch-over":   `Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". `,
		"pod-over":       "Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. ",
		"container-over": `Container app exceeded its local ephemeral storage limit "20Mi". `,
	}
	evs := f.killer.Evictions()
	if got := f.evicted(); !slices.Equal(got, []string{"scratch-over", "pod-over", "container-over"}) {
		t.Fatalf("evicted %v; want scratch-over, pod-over, container-over", got)
	}
	for _, e := range evs {
		if e.Status.Phase != corev1.PodFailed || e.Status.Reason != "Evicted" || e.Status.Message != want[e.Pod.Name] ||
			len(e.Status.Conditions) != 0 || e.GracePeriod != eviction.ImmediateGracePeriodSeconds {
			t.Errorf("%s: status %q %q %q conditions %v grace %d; want Failed, Evicted, %q, none, 1",
				e.Pod.Name, e.Status.Phase, e.Status.Reason, e.Status.Message, e.Status.Conditions, e.GracePeriod, want[e.Pod.Name])
		}
	}
	wantEvents := []string{
		"Warning Evicted " + want["scratch-over"],
		"Warning Evicted " + want["pod-over"],
		"Warning Evicted " + want["container-over"],
	}
	if got := f.events(); !slices.Equal(got, wantEvents) {
		t.Errorf("events %q; want %q", got, wantEvents)
	}
	for signal, n := range map[string]float64{"emptydirfs.limit": 1, "ephemeralpodfs.limit": 1, "ephemeralcontainerfs.limit": 1} {
		if got := testutil.ToFloat64(counter(t, f.reg, signal)); got != n {
			t.Errorf("kubelet_evictions{%s} = %v; want %v", signal, got, n)
		}
	}
}

// With a dedicated image file system a container's writable layer does not
// count against its own limit; with IgnoreLocalStorageLimits nothing is
// evicted for limits.
func TestLocalStorageLimitsOptions(t *testing.T) {
	pod := newPod("layer", ephemeralLimit("20Mi"))
	// The snapshot has no pod total beyond the container's figures: the
	// pod's total is 30Mi + 2Mi; with a dedicated image file system the
	// container's own usage is its 2Mi of logs.
	snap := eviction.Snapshot{Memory: memory(2*Gi, 2*Gi), DedicatedImageFS: true,
		Pods: []eviction.PodUsage{{UID: "layer", Containers: []eviction.ContainerUsage{{Name: "app", RootfsBytes: 30 * Mi, LogsBytes: 2 * Mi}}}}}
	f := newFixture(t, eviction.Options{}, snap, pod)
	f.sync(t)
	if got := f.evicted(); len(got) != 0 {
		t.Errorf("evicted %v with a dedicated image file system; want none (2Mi of logs is within 20Mi)", got)
	}
	snap.DedicatedImageFS = false
	f = newFixture(t, eviction.Options{IgnoreLocalStorageLimits: true}, snap, pod)
	f.sync(t)
	if got := f.evicted(); len(got) != 0 {
		t.Errorf("evicted %v with IgnoreLocalStorageLimits; want none", got)
	}
	f = newFixture(t, eviction.Options{}, snap, pod)
	f.sync(t)
	if got := f.evicted(); !slices.Equal(got, []string{"layer"}) {
		t.Errorf("evicted %v; want [layer] (30Mi writable layer + 2Mi logs over 20Mi)", got)
	}
}
