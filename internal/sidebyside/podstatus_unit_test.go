package sidebyside

import (
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// flattenStatus normalises what timing decides and keys lists by name and
// type; compareRecords reports the paths that differ, accepted or not.
func TestFlattenAndCompare(t *testing.T) {
	_, subnet, _ := net.ParseCIDR("10.251.7.0/24")
	now := metav1.NewTime(time.Now())
	status := func(ip string, restarts int32, msg string) corev1.PodStatus {
		return corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, HostIP: "192.0.2.10", StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: restarts, ContainerID: "containerd://" + ip,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}}}},
		}
	}
	k := status("10.251.7.3", 2, "back-off 10s restarting failed container=app pod=p_default(0b6f6b3e-2c1d-4c53-9a3b-1f2e3d4c5b6a)")
	n := status("10.251.7.9", 5, "back-off 20s restarting failed container=app pod=p_default(7d0c1e2f-3a4b-4c5d-8e9f-0a1b2c3d4e5f)")
	fk, fn := flattenStatus(k, "192.0.2.10", subnet), flattenStatus(n, "192.0.2.10", subnet)
	for path, want := range map[string]string{
		"status.podIP":                         "<pod network IP>",
		"status.hostIP":                        "<node IP>",
		"status.startTime":                     "set",
		"status.conditions[type=Ready].status": "True",
		"status.containerStatuses[name=app].restartCount":          ">1",
		"status.containerStatuses[name=app].containerID":           "set",
		"status.containerStatuses[name=app].state.waiting.message": "back-off <d> restarting failed container=app pod=p_default(<uid>)",
	} {
		if fk[path] != want || fn[path] != want {
			t.Errorf("%s: %q and %q, want %q", path, fk[path], fn[path], want)
		}
	}
	row := compareRecords("containerd 2", "x", &podRecord{flat: fk}, &podRecord{flat: fn})
	if row.result() != "same" || len(row.diffs) != 0 {
		t.Errorf("normalised statuses differ: %+v", row.diffs)
	}
	fn["status.phase"] = "Pending"
	row = compareRecords("containerd 2", "x", &podRecord{flat: fk}, &podRecord{flat: fn})
	if row.result() != "different" || len(row.diffs) != 1 || row.diffs[0].path != "status.phase" {
		t.Errorf("a different phase: %+v", row)
	}
}
