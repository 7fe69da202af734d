package admission_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/admission"
)

func priority(p int32) podOpt { return func(pod *corev1.Pod) { pod.Spec.Priority = &p } }

func mirror(p *corev1.Pod) { p.Annotations[podsource.ConfigMirrorAnnotation] = "hash" }

// guaranteed sets limits equal to the requests already set.
func guaranteed(p *corev1.Pod) {
	p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests.DeepCopy()
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestIsCriticalAndPreemptable(t *testing.T) {
	for _, tc := range []struct {
		pod      *corev1.Pod
		critical bool
	}{
		{pod("api"), false},
		{pod("static", static), true},
		{pod("mirror", mirror), true},
		{pod("cluster-critical", priority(2000000000)), true},
		{pod("just-below", priority(1999999999)), false},
	} {
		if got := admission.IsCritical(tc.pod); got != tc.critical {
			t.Errorf("IsCritical(%s) = %v", tc.pod.Name, got)
		}
	}
	crit, lowCrit := pod("c", priority(2000001000)), pod("lc", priority(2000000000))
	for _, tc := range []struct {
		preemptor, victim *corev1.Pod
		want              bool
	}{
		{crit, pod("normal"), true},
		{pod("s", static), pod("normal", priority(5)), true},
		{pod("s", static), pod("other-static", static), false},
		{crit, lowCrit, true}, // both critical, lower priority
		{lowCrit, crit, false},
		{pod("p10", priority(10)), pod("p5", priority(5)), true}, // not critical: priority alone
		{pod("p10", priority(10)), pod("none"), false},
		{pod("normal"), pod("other"), false},
	} {
		if got := admission.Preemptable(tc.preemptor, tc.victim); got != tc.want {
			t.Errorf("Preemptable(%s, %s) = %v", tc.preemptor.Name, tc.victim.Name, got)
		}
	}
}

// Victims chooses a minimal set as kubelet does: spare Guaranteed pods,
// then Burstable ones, pick the pod closest to what is missing, break ties
// towards the smaller memory and then cpu request, and never choose pods
// the preemptor may not preempt.
func TestVictims(t *testing.T) {
	crit := pod("crit", static)
	cases := []struct {
		name    string
		active  []*corev1.Pod
		needs   []admission.Need
		want    []string // in order; nil with err
		wantErr string
	}{
		{name: "nothing needed", active: []*corev1.Pod{pod("a")}, want: nil},
		{name: "one pod slot, the only best-effort pod",
			active: []*corev1.Pod{pod("g", requests("cpu", "1", "memory", "1Gi"), guaranteed), pod("b", requests("cpu", "100m")), pod("be")},
			needs:  []admission.Need{{"pods", 1}}, want: []string{"be"}},
		{name: "one pod slot, burstable before guaranteed",
			active: []*corev1.Pod{pod("g", requests("cpu", "1", "memory", "1Gi"), guaranteed), pod("b", requests("cpu", "100m"))},
			needs:  []admission.Need{{"pods", 1}}, want: []string{"b"}},
		{name: "cpu: the one pod that frees enough rather than two",
			active: []*corev1.Pod{pod("small1", requests("cpu", "300m")), pod("small2", requests("cpu", "300m")), pod("big", requests("cpu", "600m"))},
			needs:  []admission.Need{{"cpu", 500}}, want: []string{"big"}},
		{name: "cpu: among pods that each free enough, the smaller request",
			active: []*corev1.Pod{pod("huge", requests("cpu", "2")), pod("enough", requests("cpu", "600m")), pod("bigger", requests("cpu", "1"))},
			needs:  []admission.Need{{"cpu", 500}}, want: []string{"enough"}},
		{name: "memory ties broken by memory, then cpu",
			active: []*corev1.Pod{pod("m2", requests("memory", "2Gi", "cpu", "1")), pod("m1c2", requests("memory", "1Gi", "cpu", "2")), pod("m1c1", requests("memory", "1Gi", "cpu", "1"))},
			needs:  []admission.Need{{"pods", 1}}, want: []string{"m1c1"}},
		{name: "several pods when one is not enough, closest first",
			active: []*corev1.Pod{pod("a", requests("memory", "100Mi")), pod("b", requests("memory", "300Mi")), pod("c", requests("memory", "50Mi"))},
			needs:  []admission.Need{{"memory", 350 << 20}}, want: []string{"b", "c"}},
		{name: "guaranteed only as far as the others cannot free",
			active: []*corev1.Pod{pod("g1", requests("cpu", "1", "memory", "1Gi"), guaranteed), pod("g2", requests("cpu", "2", "memory", "1Gi"), guaranteed), pod("b", requests("cpu", "500m"))},
			needs:  []admission.Need{{"cpu", 1500}}, want: []string{"b", "g1"}},
		{name: "two resources weighted equally",
			active: []*corev1.Pod{pod("cpu-heavy", requests("cpu", "2", "memory", "10Mi")), pod("both", requests("cpu", "1", "memory", "1Gi"))},
			needs:  []admission.Need{{"cpu", 1000}, {"memory", 512 << 20}}, want: []string{"both"}},
		{name: "critical and higher-priority pods are not candidates",
			active:  []*corev1.Pod{pod("other-static", static), pod("mirror", mirror), pod("sys", priority(2000000000)), pod("normal")},
			needs:   []admission.Need{{"pods", 2}},
			wantErr: "no set of running pods found to reclaim resources: [(res: pods, q: 1), ]"},
		{name: "not enough in all",
			active:  []*corev1.Pod{pod("a", requests("cpu", "100m")), pod("b", requests("cpu", "100m"))},
			needs:   []admission.Need{{"cpu", 500}, {"pods", 1}},
			wantErr: "no set of running pods found to reclaim resources: [(res: cpu, q: 300), ]"},
		{name: "extended resources",
			active: []*corev1.Pod{pod("gpu", requests("example.com/gpu", "1")), pod("plain")},
			needs:  []admission.Need{{"example.com/gpu", 1}}, want: []string{"gpu"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			active := slices.Clone(tc.active)
			got, err := admission.Victims(crit, active, tc.needs)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q (victims %v)", err, tc.wantErr, names(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), tc.want) {
				t.Errorf("victims %v, want %v", names(got), tc.want)
			}
			if !slices.Equal(active, tc.active) {
				t.Error("Victims changed the active list")
			}
		})
	}
}

// Predicates: a critical pod lacking only resources is admitted with the
// victims to preempt; with another failure too, that failure is its
// reason; when preemption cannot free enough, UnexpectedAdmissionError.
// Other pods are rejected as before.
func TestPredicatesPreempt(t *testing.T) {
	full := []*corev1.Pod{pod("b", requests("cpu", "1500m")), pod("c", requests("cpu", "100m")), pod("d", static)}
	preds, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return testNode(), nil }, OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}

	r := preds.Admit(pod("s", static, requests("cpu", "1")), full)
	if !r.Admit || r.Reason != "OutOfpods" || !slices.Equal(names(r.Preempt), []string{"b"}) {
		t.Errorf("critical pod lacking a pod slot and cpu: %+v, victims %v", r, names(r.Preempt))
	}
	// Priority makes a pod critical too.
	r = preds.Admit(pod("p", priority(2000001000)), full)
	if !r.Admit || !slices.Equal(names(r.Preempt), []string{"c"}) {
		t.Errorf("system-critical pod: %+v, victims %v", r, names(r.Preempt))
	}
	// Not critical: rejected.
	r = preds.Admit(pod("n"), full)
	if r.Admit || r.Reason != "OutOfpods" || r.Preempt != nil {
		t.Errorf("normal pod: %+v", r)
	}
	// Critical, but the node selector does not match either: that is the reason.
	r = preds.Admit(pod("s", static, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }), full)
	if r.Admit || r.Reason != "NodeAffinity" || r.Preempt != nil {
		t.Errorf("critical pod with another failure: %+v", r)
	}
	// Critical, no room and nothing to preempt (the other pods are static).
	statics := []*corev1.Pod{pod("x", static), pod("y", static), pod("z", static)}
	r = preds.Admit(pod("s", static), statics)
	want := "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: pods, q: 1), ]"
	if r.Admit || r.Reason != "UnexpectedAdmissionError" || r.Message != want {
		t.Errorf("nothing preemptable: %+v", r)
	}
	// Critical and fits: admitted with nothing to preempt.
	r = preds.Admit(pod("s", static), full[:1])
	if !r.Admit || r.Preempt != nil || r.Reason != "" {
		t.Errorf("critical pod that fits: %+v", r)
	}
	// More than the node has at all: no set of pods frees it.
	r = preds.Admit(pod("s", static, requests("memory", "2Gi")), nil)
	if r.Admit || r.Reason != "UnexpectedAdmissionError" || !strings.Contains(r.Message, "(res: memory, q: 1073741824)") {
		t.Errorf("request beyond allocatable: %+v", r)
	}
}

func TestPreemptedStatus(t *testing.T) {
	v := pod("v")
	v.Generation = 3
	s := admission.PreemptedStatus(v)
	if s.Phase != corev1.PodFailed || s.Reason != "Preempting" || s.Message != "Preempted in order to admit critical pod" {
		t.Errorf("status %+v", s)
	}
	if len(s.Conditions) != 1 || s.Conditions[0].Type != corev1.DisruptionTarget || s.Conditions[0].Reason != "TerminationByKubelet" ||
		s.Conditions[0].Message != "Pod was preempted by Kubelet to accommodate a critical pod." || s.Conditions[0].ObservedGeneration != 3 {
		t.Errorf("condition %+v", s.Conditions)
	}
}
