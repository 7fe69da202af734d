package podsync_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestActiveDeadline: an API pod and a static pod with
// activeDeadlineSeconds run until that long after their start time, under
// the fake clock; the engine asks to step again when the deadline passes;
// then their containers are stopped and their final status is Failed with
// the kubelet's DeadlineExceeded reason and message, with a Normal event.
func TestActiveDeadline(t *testing.T) {
	for _, static := range []bool{false, true} {
		name := "api"
		if static {
			name = "static"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			rec := record.NewFakeRecorder(10)
			var err error
			h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"}, Recorder: rec})
			if err != nil {
				t.Fatal(err)
			}
			pod := busyboxPod(corev1.RestartPolicyAlways, "app")
			pod.Spec.ActiveDeadlineSeconds = new(int64(30))
			if static {
				pod.Annotations = map[string]string{podsource.ConfigSourceAnnotation: podsource.FileSource}
			}
			h.Add(pod)
			s := h.Writer.Last(pod.UID)
			if s.Phase != corev1.PodRunning || s.StartTime == nil || !s.StartTime.Time.Equal(t0) {
				t.Fatalf("before the deadline: %+v", s)
			}
			h.Clock.Step(29 * time.Second)
			h.Steps(1)
			if l, _ := h.Eng.PodLifecycle(pod.UID); l != podsync.Syncing {
				t.Fatalf("29s in: %s", l)
			}
			// The pod is due when its deadline passes, not at the next resync.
			if next, err := h.Eng.SyncOnce(h.Ctx); err != nil || next > time.Second {
				t.Errorf("next step in %v (%v), want within the 1s left", next, err)
			}
			h.Clock.Step(time.Second)
			h.Steps(3)
			if l, _ := h.Eng.PodLifecycle(pod.UID); l != podsync.Done {
				t.Fatalf("after the deadline: %s", l)
			}
			if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 0 {
				t.Errorf("%d containers still running", n)
			}
			s = h.Writer.Last(pod.UID)
			if s.Phase != corev1.PodFailed || s.Reason != podsync.ReasonDeadlineExceeded || s.Message != podsync.MessageDeadlineExceeded {
				t.Errorf("final status: %s %q %q", s.Phase, s.Reason, s.Message)
			}
			if cs := s.ContainerStatuses[0]; cs.State.Terminated == nil || cs.State.Terminated.ExitCode != runtimetest.StopExitCode {
				t.Errorf("container %+v", cs.State)
			}
			h.Writer.Mu.Lock()
			for i, st := range h.Writer.Statuses[pod.UID] {
				if st.Phase == corev1.PodFailed && i != len(h.Writer.Statuses[pod.UID])-1 {
					t.Errorf("status %d is Failed before the containers stopped", i)
				}
			}
			h.Writer.Mu.Unlock()
			select {
			case ev := <-rec.Events:
				if ev != "Normal DeadlineExceeded Pod was active on the node longer than the specified deadline" {
					t.Errorf("event %q", ev)
				}
			default:
				t.Error("no DeadlineExceeded event")
			}
		})
	}
}

// TestActiveDeadlineFromAPIStartTime: a pod whose API status says it
// started long ago (an agent restarted) is stopped at its first sync.
func TestActiveDeadlineFromAPIStartTime(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.ActiveDeadlineSeconds = new(int64(10))
	started := t0.Add(-time.Minute)
	pod.Status.StartTime = &metav1.Time{Time: started}
	h.Add(pod)
	h.Steps(2)
	if s := h.Writer.Last(pod.UID); s.Phase != corev1.PodFailed || s.Reason != podsync.ReasonDeadlineExceeded {
		t.Errorf("status %s %q", s.Phase, s.Reason)
	}
	for _, c := range h.RT.Calls() {
		if c.Method == "StartContainer" {
			t.Errorf("a container was started past the deadline")
		}
	}
}
