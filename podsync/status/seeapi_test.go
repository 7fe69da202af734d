package status_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A copy of the API pod handed in by SeeAPIPod: the echo of the writer's own
// patch changes nothing; a newer copy whose status another writer changed
// is brought back to the node's status; an older copy, a pod with no
// status yet and a mirror pod are ignored.
func TestSeeAPIPod(t *testing.T) {
	pod := apiPod("web", "uid-1")
	pod.ResourceVersion = "1" // the fake API keeps resource versions as they are given
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, runningStatus(true))
	if acts := e.sync(); len(acts) != 1 {
		t.Fatalf("actions %v", verbs(acts))
	}
	echo := e.get("web")
	e.w.SeeAPIPod(echo)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("after the echo: %v", verbs(acts))
	}

	// Another writer drops the pod's Ready condition.
	changed := echo.DeepCopy()
	var kept []corev1.PodCondition
	for _, c := range changed.Status.Conditions {
		if c.Type != corev1.PodReady {
			kept = append(kept, c)
		}
	}
	changed.Status.Conditions = kept
	changed.ResourceVersion = "2"
	changed, err := e.client.CoreV1().Pods("default").UpdateStatus(context.Background(), changed, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.w.SeeAPIPod(echo) // older: ignored
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("after an older copy: %v", verbs(acts))
	}
	e.w.SeeAPIPod(changed)
	acts := e.sync()
	if len(acts) != 1 || verbs(acts)[0] != "patch/status" {
		t.Fatalf("after a newer copy: %v", verbs(acts))
	}
	ready := false
	for _, c := range e.get("web").Status.Conditions {
		ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}
	if !ready {
		t.Errorf("Ready not written back: %+v", e.get("web").Status.Conditions)
	}

	other := apiPod("other", "uid-2")
	other.ResourceVersion = "7"
	e.w.SeeAPIPod(other)
	_, mirror := staticPod("static")
	e.w.SeeAPIPod(mirror)
	e.w.SeeAPIPod(nil)
	if acts := e.sync(); len(acts) != 0 {
		t.Errorf("after pods with no status: %v", verbs(acts))
	}
	if _, ok := e.w.Status("uid-2"); ok {
		t.Error("a status recorded for a pod only seen")
	}
}

// A newer copy handed in by SeeAPIPod whose phase another writer made
// terminal is settled as SetPodStatus settles it: the phase is kept and
// never written back to Running.
func TestSeeAPIPodKeepsTerminalPhase(t *testing.T) {
	pod := apiPod("job", "uid-1")
	pod.ResourceVersion = "1"
	e := newEnv(t, pod)
	e.w.SetPodStatus(pod, runningStatus(true))
	e.sync()
	done := e.get("job")
	done.Status = succeededStatus()
	done.ResourceVersion = "2"
	done, err := e.client.CoreV1().Pods("default").UpdateStatus(context.Background(), done, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.w.SeeAPIPod(done)
	e.succeededKept("job", "uid-1")
}
