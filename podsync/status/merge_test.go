package status

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestStatusPatch(t *testing.T) {
	api := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
			{Type: "example.com/gate", Status: corev1.ConditionTrue},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		},
	}
	if p, err := statusPatch("u1", &api, api.DeepCopy()); err != nil || p != nil {
		t.Fatalf("same status: patch %s, error %v", p, err)
	}
	want := api.DeepCopy()
	want.Conditions[0].Status = corev1.ConditionTrue
	p, err := statusPatch("u1", &api, want)
	if err != nil {
		t.Fatal(err)
	}
	if got, exp := string(p), `{"metadata":{"uid":"u1"},"status":{"conditions":[{"status":"True","type":"Ready"}]}}`; got != exp {
		t.Errorf("patch\n%s\nwant\n%s", got, exp)
	}
}

func TestTarget(t *testing.T) {
	ltt := metav1.NewTime(t0)
	api := corev1.PodStatus{
		Phase:             corev1.PodSucceeded,
		NominatedNodeName: "n",
		StartTime:         &ltt,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: ltt},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
			{Type: "example.com/gate", Status: corev1.ConditionTrue},
		},
	}
	later := metav1.NewTime(t0.Add(time.Hour))
	node := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: &later,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: later},
			{Type: "example.com/gate", Status: corev1.ConditionFalse},
		},
	}
	got := target(&api, &node, t0.Add(2*time.Hour))
	if got.Phase != corev1.PodSucceeded || got.NominatedNodeName != "n" || !got.StartTime.Equal(&ltt) {
		t.Errorf("phase %s, nominated %q, start %v", got.Phase, got.NominatedNodeName, got.StartTime)
	}
	conds := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range got.Conditions {
		conds[c.Type] = c
	}
	if len(conds) != 3 || conds["example.com/gate"].Status != corev1.ConditionTrue || conds[corev1.DisruptionTarget].Status != corev1.ConditionTrue {
		t.Errorf("conditions of others not kept as the API has them: %+v", got.Conditions)
	}
	if c := conds[corev1.PodReady]; c.Status != corev1.ConditionFalse || c.Reason != ReasonPodCompleted {
		t.Errorf("Ready %+v, want False under a terminal phase", c)
	}
}

// A terminal phase the API has is kept in the recorded status, even after
// the node recorded a status of its own.
func TestTerminalFromAPIKept(t *testing.T) {
	w, err := New(Options{Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "p", UID: "u1", ResourceVersion: "5",
		Annotations: map[string]string{podsource.ConfigSourceAnnotation: podsource.APISource},
	}}
	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning})
	newer := pod.DeepCopy()
	newer.ResourceVersion = "7"
	newer.Status.Phase = corev1.PodFailed
	w.SetPodStatus(newer, corev1.PodStatus{Phase: corev1.PodRunning})
	if s, _ := w.Status("u1"); s.Phase != corev1.PodFailed {
		t.Errorf("phase %s, want Failed from the API", s.Phase)
	}
	// An older copy does not replace the newer one.
	w.SetPodStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning})
	if s, _ := w.Status("u1"); s.Phase != corev1.PodFailed {
		t.Errorf("phase %s after an older copy", s.Phase)
	}
}

func TestNormalizeTruncatesMessages(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: make([]corev1.Container, 4)}}
	s := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name:  "b",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: strings.Repeat("x", 10000), FinishedAt: metav1.NewTime(t0.Add(time.Millisecond))}},
	}, {Name: "a"}}}
	normalize(pod, &s)
	if s.ContainerStatuses[0].Name != "a" {
		t.Error("container statuses not sorted by name")
	}
	term := s.ContainerStatuses[1].State.Terminated
	if len(term.Message) != 3*1024 || !term.FinishedAt.Time.Equal(t0) {
		t.Errorf("message %d bytes, finished %v", len(term.Message), term.FinishedAt)
	}
}
