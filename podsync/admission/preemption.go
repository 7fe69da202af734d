package admission

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podsource"
)

// SystemCriticalPriority is the lowest priority of a critical pod, that of
// the system-cluster-critical class.
const SystemCriticalPriority = 2000000000

// Kubelet's texts for preemption at admission.
const (
	// ReasonPreempting is the status reason and event reason of a pod
	// stopped to make room for a critical pod.
	ReasonPreempting = "Preempting"
	// PreemptedMessage is the status and event message of such a pod.
	PreemptedMessage = "Preempted in order to admit critical pod"
	// PreemptedConditionMessage is the message of its DisruptionTarget
	// condition (reason TerminationByKubelet).
	PreemptedConditionMessage = "Pod was preempted by Kubelet to accommodate a critical pod."
	// ReasonUnexpectedAdmissionError rejects a critical pod when no set of
	// running pods frees what it lacks.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
)

// IsCritical reports whether pod is critical to the node: a static pod, a
// mirror pod, or one whose priority is at least SystemCriticalPriority.
// Kubelet never evicts a critical pod under pressure, admits it under any
// pressure, and makes room for it at admission by preempting other pods.
func IsCritical(pod *corev1.Pod) bool {
	if podsource.IsStaticPod(pod) || podsource.IsMirrorPod(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// Preemptable reports whether preemptor may have victim stopped to be
// admitted: a critical pod preempts pods that are not critical, and, when
// both have a priority, a pod preempts pods of lower priority.
func Preemptable(preemptor, victim *corev1.Pod) bool {
	if IsCritical(preemptor) && !IsCritical(victim) {
		return true
	}
	return preemptor.Spec.Priority != nil && victim.Spec.Priority != nil && *preemptor.Spec.Priority > *victim.Spec.Priority
}

// PreemptedStatus is the status kubelet lays over a pod it preempts: phase
// Failed, reason Preempting, its message, and a DisruptionTarget condition
// with reason TerminationByKubelet. The condition's transition time is the
// caller's to set.
func PreemptedStatus(victim *corev1.Pod) corev1.PodStatus {
	return corev1.PodStatus{
		Phase:   corev1.PodFailed,
		Reason:  ReasonPreempting,
		Message: PreemptedMessage,
		Conditions: []corev1.PodCondition{{
			Type:               corev1.DisruptionTarget,
			Status:             corev1.ConditionTrue,
			Reason:             corev1.PodReasonTerminationByKubelet,
			Message:            PreemptedConditionMessage,
			ObservedGeneration: victim.Generation,
		}},
	}
}

// Need is an amount of one resource to free: cpu in millicores, pods in
// pods, the rest in units.
type Need struct {
	Resource corev1.ResourceName
	Amount   int64
}

// Victims chooses which of the active pods to stop so that the needs are
// freed for pod, as kubelet's critical-pod admission chooses them: only
// pods pod may preempt (Preemptable) are candidates; Guaranteed pods are
// spared as far as the Burstable and BestEffort ones can free the needs,
// then Burstable pods as far as the BestEffort ones (and the Guaranteed
// ones already chosen) can; within each class the pods are picked one at a
// time, each time the one whose requests leave the least of the remaining
// needs (every need weighted by the fraction of it left, squared), ties
// going to the pod with the smaller memory request, then cpu request (a
// full tie goes by position in active). The victims come BestEffort first,
// then Burstable, then Guaranteed. It is an error, naming what stays
// missing, when even every candidate would not free the needs.
func Victims(pod *corev1.Pod, active []*corev1.Pod, needs []Need) ([]*corev1.Pod, error) {
	var bestEffort, burstable, guaranteed []*corev1.Pod
	for _, a := range active {
		if !Preemptable(pod, a) {
			continue
		}
		switch QOSClass(a) {
		case corev1.PodQOSBestEffort:
			bestEffort = append(bestEffort, a)
		case corev1.PodQOSBurstable:
			burstable = append(burstable, a)
		default:
			guaranteed = append(guaranteed, a)
		}
	}
	all := concat(bestEffort, burstable, guaranteed)
	if rest := remaining(needs, all); len(rest) > 0 {
		return nil, fmt.Errorf("no set of running pods found to reclaim resources: %s", needsString(rest))
	}
	g := closest(guaranteed, remaining(needs, concat(bestEffort, burstable)))
	b := closest(burstable, remaining(needs, concat(bestEffort, g)))
	be := closest(bestEffort, remaining(needs, concat(b, g)))
	return concat(be, b, g), nil
}

// closest picks pods from candidates, each time the one nearest to the
// remaining needs, until none remain. The caller made sure candidates can
// free them.
func closest(candidates []*corev1.Pod, needs []Need) []*corev1.Pod {
	left := append([]*corev1.Pod(nil), candidates...)
	var out []*corev1.Pod
	for len(needs) > 0 && len(left) > 0 {
		best, bestDist := 0, float64(len(needs)+1)
		for i, p := range left {
			d := distance(needs, p)
			if d < bestDist || (d == bestDist && !largerRequest(p, left[best])) {
				best, bestDist = i, d
			}
		}
		out = append(out, left[best])
		needs = remaining(needs, left[best:best+1])
		left[best] = left[len(left)-1]
		left = left[:len(left)-1]
	}
	return out
}

// distance is how far freeing p leaves the needs from met: the sum over
// the needs of the fraction left unmet, squared.
func distance(needs []Need, p *corev1.Pod) float64 {
	var d float64
	for _, n := range needs {
		if left := n.Amount - request(p, n.Resource); left > 0 {
			f := float64(left) / float64(n.Amount)
			d += f * f
		}
	}
	return d
}

// largerRequest reports whether a requests more than b: memory decides,
// then cpu.
func largerRequest(a, b *corev1.Pod) bool {
	for _, name := range [...]corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU} {
		if ra, rb := request(a, name), request(b, name); ra != rb {
			return ra > rb
		}
	}
	return false
}

// remaining is what of needs stays unmet once pods are stopped.
func remaining(needs []Need, pods []*corev1.Pod) []Need {
	var out []Need
	for _, n := range needs {
		left := n.Amount
		for _, p := range pods {
			if left <= 0 {
				break
			}
			left -= request(p, n.Resource)
		}
		if left > 0 {
			out = append(out, Need{Resource: n.Resource, Amount: left})
		}
	}
	return out
}

// needsString writes needs as kubelet logs and reports them:
// "[(res: pods, q: 1), ]".
func needsString(needs []Need) string {
	var b strings.Builder
	b.WriteString("[")
	for _, n := range needs {
		fmt.Fprintf(&b, "(res: %s, q: %d), ", n.Resource, n.Amount)
	}
	b.WriteString("]")
	return b.String()
}

func concat(lists ...[]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
