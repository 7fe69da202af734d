package eviction

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/internal/pressure"
	"github.com/nodekit/nodekit/podsync/admission"
)

// ConditionSetter writes one pressure condition from the manager's last
// sync. Its SetStatus is nodestatus.StatusSetter's method, so it replaces
// nodestatus's own setter of the same name:
//
//	setters, err = setters.Replace(nodestatus.SetterMemoryPressure, mgr.ConditionSetter(corev1.NodeMemoryPressure))
type ConditionSetter struct {
	m    *Manager
	spec pressure.Condition // kubelet's wording
}

// ConditionSetter returns the setter of condition c: MemoryPressure,
// DiskPressure or PIDPressure. It panics on another type.
func (m *Manager) ConditionSetter(c corev1.NodeConditionType) ConditionSetter {
	spec, ok := pressure.LookupCondition(c)
	if !ok {
		panic(fmt.Sprintf("eviction: %q is not a pressure condition", c))
	}
	return ConditionSetter{m: m, spec: spec}
}

// SetStatus writes the condition into node with kubelet's reason and
// message: lastHeartbeatTime now, lastTransitionTime now when the status
// changes (kept otherwise). A change records kubelet's Normal event on the
// node ("Node <name> status is now: NodeHasInsufficientMemory"). Other
// conditions are not touched. It never waits on a sync.
func (s ConditionSetter) SetStatus(ctx context.Context, node *corev1.Node) error {
	on := s.m.hasCondition(s.spec.Type)
	c := corev1.NodeCondition{Type: s.spec.Type, Status: corev1.ConditionFalse, Reason: s.spec.FalseReason, Message: s.spec.FalseMessage}
	event := s.spec.FalseEvent
	if on {
		c.Status, c.Reason, c.Message, event = corev1.ConditionTrue, s.spec.TrueReason, s.spec.TrueMessage, s.spec.TrueEvent
	}
	if setCondition(node, c, metav1.NewTime(s.m.o.Clock.Now())) {
		s.m.event(node, nil, corev1.EventTypeNormal, event, fmt.Sprintf("Node %s status is now: %s", node.Name, event))
	}
	return nil
}

// SetStatus writes the three pressure conditions, as the three
// ConditionSetters in turn.
func (m *Manager) SetStatus(ctx context.Context, node *corev1.Node) error {
	for _, c := range pressure.Conditions() {
		_ = ConditionSetter{m: m, spec: c}.SetStatus(ctx, node)
	}
	return nil
}

// setCondition replaces or appends c in node's conditions with kubelet's
// bookkeeping and reports whether the status differs from the one there
// (a condition that was missing counts as changed).
func setCondition(node *corev1.Node, c corev1.NodeCondition, now metav1.Time) bool {
	c.LastHeartbeatTime = now
	for i := range node.Status.Conditions {
		old := &node.Status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		changed := old.Status != c.Status
		c.LastTransitionTime = old.LastTransitionTime
		if changed || c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		*old = c
		return changed
	}
	c.LastTransitionTime = now
	node.Status.Conditions = append(node.Status.Conditions, c)
	return true
}

var _ admission.Admitter = (*Manager)(nil)

// Admit is kubelet's eviction admission with the manager's conditions
// (see AdmitUnderPressure). Kubelet runs it before its other admission
// handlers.
func (m *Manager) Admit(pod *corev1.Pod, _ []*corev1.Pod) admission.Result {
	return AdmitUnderPressure(m.state.Load().Conditions, pod)
}

// AdmitUnderPressure is kubelet's eviction admission rule: with no
// pressure condition every pod is admitted, and so is a critical pod
// (admission.IsCritical) under any; under MemoryPressure alone, a pod that is not
// BestEffort, or a BestEffort pod that tolerates the
// node.kubernetes.io/memory-pressure:NoSchedule taint, is admitted; every
// other pod is rejected with reason Evicted and the message "The node had
// condition: [MemoryPressure]. " (the conditions that hold).
func AdmitUnderPressure(conditions []corev1.NodeConditionType, pod *corev1.Pod) admission.Result {
	if len(conditions) == 0 || admission.IsCritical(pod) {
		return admission.Admitted
	}
	if len(conditions) == 1 && conditions[0] == corev1.NodeMemoryPressure {
		if admission.QOSClass(pod) != corev1.PodQOSBestEffort {
			return admission.Admitted
		}
		taint := &corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}
		if schedcorev1.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, taint, false) {
			return admission.Admitted
		}
	}
	return admission.Result{Reason: Reason, Message: fmt.Sprintf("The node had condition: %v. ", conditions)}
}
