package eviction_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/eviction"
)

// The setters take nodestatus's place in its list of setters.
var (
	_ nodestatus.StatusSetter = eviction.ConditionSetter{}
	_ nodestatus.StatusSetter = (*eviction.Manager)(nil)
	_ admission.Admitter      = (*eviction.Manager)(nil)
)

func TestSetStatus(t *testing.T) {
	snap := eviction.Snapshot{
		Memory: memory(Gi, Gi),
		NodeFS: &eviction.FsStats{AvailableBytes: Gi, CapacityBytes: 100 * Gi, InodesFree: 100, Inodes: 100},
	}
	f := newFixture(t, eviction.Options{}, snap)
	node := &corev1.Node{}
	node.Name = "node-1"
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	f.sync(t)
	if err := f.m.SetStatus(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	want := map[corev1.NodeConditionType][3]string{
		corev1.NodeReady:          {"True", "", ""},
		corev1.NodeMemoryPressure: {"False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
		corev1.NodeDiskPressure:   {"True", "KubeletHasDiskPressure", "kubelet has disk pressure"},
		corev1.NodePIDPressure:    {"False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
	}
	check := func(when string) {
		t.Helper()
		if len(node.Status.Conditions) != len(want) {
			t.Fatalf("%s: conditions %+v", when, node.Status.Conditions)
		}
		for _, c := range node.Status.Conditions {
			if w := want[c.Type]; string(c.Status) != w[0] || c.Reason != w[1] || c.Message != w[2] {
				t.Errorf("%s: %s = %s %q %q, want %v", when, c.Type, c.Status, c.Reason, c.Message, w)
			}
		}
	}
	check("first")
	if got := f.events(); !slices.Contains(got, "Normal NodeHasDiskPressure Node node-1 status is now: NodeHasDiskPressure") ||
		!slices.Contains(got, "Normal NodeHasSufficientMemory Node node-1 status is now: NodeHasSufficientMemory") {
		t.Errorf("events %q", got)
	}

	// Disk frees up; the condition holds for the transition period, then
	// flips with a new transition time and one event.
	f.obs.Update(func(s *eviction.Snapshot) { s.NodeFS.AvailableBytes = 50 * Gi })
	f.clock.Step(eviction.DefaultPressureTransitionPeriod)
	f.sync(t)
	f.events()
	_ = f.m.SetStatus(context.Background(), node)
	want[corev1.NodeDiskPressure] = [3]string{"False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"}
	check("after the transition period")
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeDiskPressure:
			if !c.LastTransitionTime.Time.Equal(t0.Add(5*time.Minute)) || !c.LastHeartbeatTime.Time.Equal(t0.Add(5*time.Minute)) {
				t.Errorf("DiskPressure times %v %v", c.LastTransitionTime, c.LastHeartbeatTime)
			}
		case corev1.NodeMemoryPressure:
			if !c.LastTransitionTime.Time.Equal(t0) || !c.LastHeartbeatTime.Time.Equal(t0.Add(5*time.Minute)) {
				t.Errorf("MemoryPressure times %v %v", c.LastTransitionTime, c.LastHeartbeatTime)
			}
		}
	}
	if got := f.events(); !slices.Equal(got, []string{"Normal NodeHasNoDiskPressure Node node-1 status is now: NodeHasNoDiskPressure"}) {
		t.Errorf("events %q", got)
	}
}

func TestAdmit(t *testing.T) {
	mp := []corev1.NodeConditionType{corev1.NodeMemoryPressure}
	dp := []corev1.NodeConditionType{corev1.NodeDiskPressure}
	both := []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure}
	pidp := []corev1.NodeConditionType{corev1.NodePIDPressure}
	burstable := newPod("burstable", request(corev1.ResourceMemory, "10Mi"))
	tolerant := newPod("tolerant")
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	diskTolerant := newPod("disk-tolerant")
	diskTolerant.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists}}
	for _, tt := range []struct {
		name  string
		conds []corev1.NodeConditionType
		pod   *corev1.Pod
		msg   string // "" when admitted
	}{
		{"no pressure", nil, newPod("be"), ""},
		{"memory: best effort", mp, newPod("be"), "The node had condition: [MemoryPressure]. "},
		{"memory: burstable", mp, burstable, ""},
		{"memory: tolerates the taint", mp, tolerant, ""},
		{"memory: tolerates another taint", mp, diskTolerant, "The node had condition: [MemoryPressure]. "},
		{"memory: static best effort", mp, newPod("static", static()), ""},
		{"disk: burstable", dp, burstable, "The node had condition: [DiskPressure]. "},
		{"disk: critical", dp, newPod("critical", priority(2000000000)), ""},
		{"memory and disk: burstable", both, burstable, "The node had condition: [MemoryPressure DiskPressure]. "},
		{"memory and disk: tolerates memory", both, tolerant, "The node had condition: [MemoryPressure DiskPressure]. "},
		{"pid: burstable", pidp, burstable, "The node had condition: [PIDPressure]. "},
	} {
		r := eviction.AdmitUnderPressure(tt.conds, tt.pod)
		if tt.msg == "" {
			if !r.Admit {
				t.Errorf("%s: rejected: %+v", tt.name, r)
			}
			continue
		}
		if r.Admit || r.Reason != "Evicted" || r.Message != tt.msg {
			t.Errorf("%s: %+v, want Evicted %q", tt.name, r, tt.msg)
		}
	}

	f := newFixture(t, eviction.Options{}, eviction.Snapshot{Memory: memory(Mi, Gi)})
	if r := f.m.Admit(newPod("be"), nil); !r.Admit {
		t.Errorf("admitted before any sync: %+v", r)
	}
	f.sync(t)
	if r := f.m.Admit(newPod("be"), nil); r.Admit || r.Status(corev1.PodQOSBestEffort).Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("under memory pressure: %+v", r)
	}
}
