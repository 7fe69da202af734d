package cri

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/podsource"
)

// An ephemeral container added to a running pod starts once, in the pod's
// sandbox, sharing its target's process namespace, and reports its own
// status; the app container is left as it was.
func TestE2EEphemeralContainer(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2EEphemeralContainer)
}

func testE2EEphemeralContainer(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	pod := e2ePod(c, "ephemeral", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	appID := s.ContainerStatuses[0].ContainerID

	debug := pod.DeepCopy()
	debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
			// PID 1 of the target's namespace is the app's shell.
			Command:                []string{"sh", "-c", `tr '\0' ' ' </proc/1/cmdline >/dev/termination-log`},
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile},
		TargetContainerName: "app",
	}}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{debug}})
	s = e.waitStatus(debug, "ephemeral container done", func(s corev1.PodStatus) bool {
		return len(s.EphemeralContainerStatuses) == 1 && s.EphemeralContainerStatuses[0].State.Terminated != nil
	})
	term := s.EphemeralContainerStatuses[0].State.Terminated
	if term.ExitCode != 0 || !strings.Contains(term.Message, "trap") {
		t.Errorf("ephemeral container ended %d with %q, want 0 and the app's command line", term.ExitCode, term.Message)
	}
	if s.Phase != corev1.PodRunning || s.ContainerStatuses[0].ContainerID != appID || s.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("app container changed: phase %s, %s restarts %d (was %s)", s.Phase, s.ContainerStatuses[0].ContainerID, s.ContainerStatuses[0].RestartCount, appID)
	}
	// It is not started again at the next syncs.
	e.eng.Trigger(debug.UID)
	e.waitStatus(debug, "still one ephemeral run", func(s corev1.PodStatus) bool {
		st := e.eng.State(debug.UID)
		n := 0
		for _, ct := range st.Containers {
			if ct.Name == "debug" {
				n++
			}
		}
		return n == 1
	})
	e.remove(debug)
}
