package admission_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsync/admission"
)

func TestChainFirstRefusalWins(t *testing.T) {
	var calls []string
	admitter := func(name string, r admission.Result) admission.Admitter {
		return admission.AdmitterFunc(func(*corev1.Pod, []*corev1.Pod) admission.Result {
			calls = append(calls, name)
			return r
		})
	}
	var c admission.Chain
	if r := c.Admit(&corev1.Pod{}, nil); !r.Admit {
		t.Fatalf("empty chain: %+v, want admitted", r)
	}
	victim := &corev1.Pod{}
	c.Add(admitter("preempts", admission.Result{Admit: true, Preempt: []*corev1.Pod{victim}}))
	c.Add(nil)
	c.Add(admitter("refuses", admission.Result{Reason: "Evicted", Message: "pressure"}))
	c.Add(admitter("never asked", admission.Admitted))
	r := c.Admit(&corev1.Pod{}, nil)
	if r.Admit || r.Reason != "Evicted" {
		t.Errorf("Admit = %+v, want the refusal", r)
	}
	if len(calls) != 2 || calls[1] != "refuses" {
		t.Errorf("calls %v, want [preempts refuses]", calls)
	}
	var p admission.Chain
	p.Add(admitter("preempts", admission.Result{Admit: true, Preempt: []*corev1.Pod{victim}}))
	p.Add(admitter("admits", admission.Admitted))
	if r := p.Admit(&corev1.Pod{}, nil); !r.Admit || len(r.Preempt) != 1 {
		t.Errorf("Admit = %+v, want admitted with the victim", r)
	}
}
