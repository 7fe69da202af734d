package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// randomStatus is a pod status of the kinds a node and the API write:
// phases, conditions (the node's and others', in any order, some with
// reasons, messages and times), addresses, a start time, container
// statuses in every state, and now and then pod-level resources (which
// the quick path leaves to the library when they change inside).
func randomStatus(r *rand.Rand) corev1.PodStatus {
	pick := func(s ...string) string { return s[r.IntN(len(s))] }
	tm := func() metav1.Time { return metav1.NewTime(t0.Add(time.Duration(r.IntN(4)) * time.Second)) }
	var s corev1.PodStatus
	s.Phase = corev1.PodPhase(pick("", "Pending", "Running", "Succeeded", "Failed"))
	s.QOSClass = corev1.PodQOSClass(pick("", "BestEffort", "Burstable"))
	s.Message, s.Reason = pick("", "m1", "a <b> & c"), pick("", "Evicted", "DeadlineExceeded")
	s.NominatedNodeName = pick("", "n1")
	if r.IntN(2) == 0 {
		s.HostIP = pick("10.0.0.1", "10.0.0.2")
		s.HostIPs = []corev1.HostIP{{IP: s.HostIP}}
		if r.IntN(3) == 0 {
			s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: "fd00::1"})
		}
	}
	if r.IntN(2) == 0 {
		s.PodIP = pick("10.1.0.5", "10.1.0.6")
		s.PodIPs = []corev1.PodIP{{IP: s.PodIP}}
		if r.IntN(3) == 0 {
			s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: pick("fd01::5", "fd01::6")})
		}
	}
	if r.IntN(3) > 0 {
		t := tm()
		s.StartTime = &t
	}
	types := []corev1.PodConditionType{"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled", "DisruptionTarget", "example.com/gate"}
	r.Shuffle(len(types), func(i, j int) { types[i], types[j] = types[j], types[i] })
	for _, ct := range types[:r.IntN(len(types)+1)] {
		c := corev1.PodCondition{Type: ct, Status: corev1.ConditionStatus(pick("True", "False", "Unknown"))}
		if r.IntN(2) == 0 {
			c.LastTransitionTime = tm()
		}
		if r.IntN(3) == 0 {
			c.Reason, c.Message = pick("ContainersNotReady", "PodCompleted"), pick("", "containers with unready status: [c]")
		}
		if r.IntN(5) == 0 {
			c.ObservedGeneration = int64(r.IntN(3))
		}
		s.Conditions = append(s.Conditions, c)
	}
	for i := range r.IntN(3) {
		cs := corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i), Image: "img", ImageID: pick("", "sha256:1"), ContainerID: pick("", "sim://1", "sim://2"),
			Ready: r.IntN(2) == 0, RestartCount: int32(r.IntN(3))}
		switch r.IntN(3) {
		case 0:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: pick("ContainerCreating", "CrashLoopBackOff")}
		case 1:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: tm()}
		default:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(r.IntN(2)), Reason: "Completed", StartedAt: tm(), FinishedAt: tm()}
		}
		if r.IntN(4) == 0 {
			cs.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(pick("10m", "20m"))}}
		}
		if r.IntN(2) == 0 {
			s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
		} else {
			s.ContainerStatuses = append(s.ContainerStatuses, cs)
		}
	}
	if r.IntN(5) == 0 {
		s.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(pick("10m", "20m"))}}
		s.AllocatedResources = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick("1Mi", "2Mi"))}
	}
	return s
}

// mutate changes a few things of s, as one status differs from the next.
func mutate(r *rand.Rand, s corev1.PodStatus) corev1.PodStatus {
	s = *s.DeepCopy()
	o := randomStatus(r)
	for range 1 + r.IntN(3) {
		switch r.IntN(8) {
		case 0:
			s.Phase = o.Phase
		case 1:
			if len(s.Conditions) > 0 {
				i := r.IntN(len(s.Conditions))
				s.Conditions[i].Status, s.Conditions[i].Reason = corev1.ConditionStatus([]string{"True", "False", "Unknown"}[r.IntN(3)]), "Changed"
			}
		case 2:
			if len(s.Conditions) > 0 {
				s.Conditions = s.Conditions[1:]
			}
		case 3:
			s.Conditions = o.Conditions
		case 4:
			s.PodIP, s.PodIPs = o.PodIP, o.PodIPs
		case 5:
			s.ContainerStatuses, s.InitContainerStatuses = o.ContainerStatuses, o.InitContainerStatuses
		case 6:
			s.StartTime, s.HostIP, s.HostIPs = o.StartTime, o.HostIP, o.HostIPs
		default:
			s = o
		}
	}
	return s
}

// sameJSON reports whether a and b hold the same JSON value (lists in
// order, objects by key).
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// The quick path's patches are the library's (the same JSON, of the same
// length) on thousands of status pairs; the pairs it leaves to the library
// are few.
func TestQuickStatusPatchIsTheLibrarys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	quick := 0
	const n = 5000
	for i := range n {
		api := randomStatus(r)
		want := mutate(r, api)
		lib, err := libraryStatusPatch("u1", &api, &want)
		if err != nil {
			t.Fatalf("pair %d: library: %v", i, err)
		}
		got, err := statusPatch("u1", &api, &want)
		if err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		if !sameJSON(got, lib) {
			t.Fatalf("pair %d: patch\n%s\nthe library's\n%s\napi %+v\nwant %+v", i, got, lib, api, want)
		}
		if len(got) != len(lib) {
			t.Fatalf("pair %d: patch of %d bytes, the library's %d", i, len(got), len(lib))
		}
		if _, err := quickPatchFields(&api, &want); err == nil {
			quick++
		} else if !errors.Is(err, errQuickPatch) {
			t.Fatalf("pair %d: %v", i, err)
		}
	}
	if quick < n*3/4 {
		t.Errorf("the quick path computed %d of %d patches, want most", quick, n)
	}
}

// BenchmarkStatusPatch is the patch of a pod that starts: Pending with its
// QoS class to Running and Ready with its addresses and container.
func BenchmarkStatusPatch(b *testing.B) {
	start := metav1.NewTime(t0)
	api := corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
	want := corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBestEffort, StartTime: &start,
		HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}}, PodIP: "10.0.0.2", PodIPs: []corev1.PodIP{{IP: "10.0.0.2"}},
		Conditions: []corev1.PodCondition{
			{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: start},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: start},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: start},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "registry.local/pause:1", ImageID: "sha256:1", ContainerID: "sim://1",
			Ready: true, Started: new(bool), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}}}
	for _, bc := range []struct {
		name string
		fn   func() ([]byte, error)
	}{
		{"quick", func() ([]byte, error) { return statusPatch("u1", &api, &want) }},
		{"library", func() ([]byte, error) { return libraryStatusPatch("u1", &api, &want) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
