package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/nodekit/nodekit/internal/podequal"
)

// Reasons and messages the writer puts into statuses, as kubelet words them.
const (
	// ReasonContainerStatusUnknown is the terminated reason of a container
	// still not terminated when its pod was reported terminated.
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	// ReasonPodCompleted and ReasonPodFailed are the reasons of the Ready
	// and ContainersReady conditions turned False by a terminal phase.
	ReasonPodCompleted = "PodCompleted"
	ReasonPodFailed    = "PodFailed"

	messageContainerUnknown = "The container could not be located when the pod was terminated"
	// maxTerminationMessages is what all of a pod's termination messages may
	// take together, shared out between its containers (kubelet: 12 KiB).
	maxTerminationMessages = 12 * 1024
)

// nodeConditions are the pod condition types the node owns: it writes them
// and drops them when it no longer reports them. Every other type belongs to
// someone else and is kept as the API has it.
var nodeConditions = []corev1.PodConditionType{
	corev1.PodScheduled,
	corev1.PodReady,
	corev1.PodInitialized,
	corev1.ContainersReady,
	corev1.PodResizeInProgress,
	corev1.PodResizePending,
	corev1.PodReadyToStartContainers,
	corev1.AllContainersRestarting,
}

// ownedByNode reports whether the node writes conditions of type t. The
// DisruptionTarget condition is shared: the node may add it, others too.
func ownedByNode(t corev1.PodConditionType) bool {
	return slices.Contains(nodeConditions, t)
}

func terminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// normalize truncates every timestamp to the second (the API keeps no more,
// so a finer time would differ from the API's copy forever), cuts
// termination messages to their share of 12 KiB, and sorts regular and
// ephemeral container statuses by name. It changes s in place.
func normalize(pod *corev1.Pod, s *corev1.PodStatus) {
	share := maxTerminationMessages
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > 0 {
		share /= n
	}
	sec := func(t *metav1.Time) { *t = t.Rfc3339Copy() }
	state := func(c *corev1.ContainerState) {
		if c.Running != nil {
			sec(&c.Running.StartedAt)
		}
		if c.Terminated != nil {
			sec(&c.Terminated.StartedAt)
			sec(&c.Terminated.FinishedAt)
			if len(c.Terminated.Message) > share {
				c.Terminated.Message = c.Terminated.Message[:share]
			}
		}
	}
	if s.StartTime != nil {
		sec(s.StartTime)
	}
	for i := range s.Conditions {
		sec(&s.Conditions[i].LastProbeTime)
		sec(&s.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			state(&list[i].State)
			state(&list[i].LastTerminationState)
		}
	}
	byName := func(a, b corev1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) }
	slices.SortStableFunc(s.ContainerStatuses, byName)
	slices.SortStableFunc(s.EphemeralContainerStatuses, byName)
}

// settle fills in what the node's new status s takes from its previous one,
// old: a condition's transition time moves only when its status changes
// (else now), the start time never changes once set (else now), the
// observed generation never goes back, and a terminal phase is never left.
// A terminal phase turns Ready and ContainersReady False.
func settle(s, old *corev1.PodStatus, now time.Time) {
	stamp := metav1.NewTime(now).Rfc3339Copy()
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if o := findCondition(old.Conditions, c.Type); o != nil && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = stamp
		}
	}
	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		s.StartTime = old.StartTime.DeepCopy()
	case s.StartTime == nil || s.StartTime.IsZero():
		s.StartTime = &stamp
	}
	s.ObservedGeneration = max(s.ObservedGeneration, old.ObservedGeneration)
	keepTerminal(s, old)
	notReadyIfTerminal(s, stamp)
}

// keepTerminal puts old's terminal phase (with its reason and message) back
// into s when s would leave it.
func keepTerminal(s, old *corev1.PodStatus) {
	if terminal(old.Phase) && s.Phase != old.Phase {
		s.Phase, s.Reason, s.Message = old.Phase, old.Reason, old.Message
	}
}

// notReadyIfTerminal turns a True Ready or ContainersReady condition False
// when s's phase is terminal.
func notReadyIfTerminal(s *corev1.PodStatus, stamp metav1.Time) {
	if !terminal(s.Phase) {
		return
	}
	reason := ReasonPodFailed
	if s.Phase == corev1.PodSucceeded {
		reason = ReasonPodCompleted
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status == corev1.ConditionTrue {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionFalse, reason, "", stamp
		}
	}
}

// terminated is the status of a pod whose containers no longer run: a
// container that still looks started but not terminated is reported
// terminated with ContainerStatusUnknown and exit code 137, and, unless the
// pod is static (kubelet leaves static pods' phase alone), a phase that is
// not terminal becomes Failed.
func terminated(pod *corev1.Pod, s corev1.PodStatus, static bool) corev1.PodStatus {
	s = *s.DeepCopy()
	unknown := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Reason: ReasonContainerStatusUnknown, Message: messageContainerUnknown, ExitCode: 137,
	}}
	started := func(c *corev1.ContainerStatus) bool {
		return c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil
	}
	// Regular containers were only ever started once the pod initialized.
	initialized := len(pod.Spec.InitContainers) == 0
	for i := range s.ContainerStatuses {
		initialized = initialized || started(&s.ContainerStatuses[i])
	}
	if initialized {
		for i := range s.ContainerStatuses {
			if s.ContainerStatuses[i].State.Terminated == nil {
				s.ContainerStatuses[i].State = *unknown.DeepCopy()
			}
		}
	}
	for i := range s.InitContainerStatuses {
		if c := &s.InitContainerStatuses[i]; c.State.Terminated == nil && started(c) {
			c.State = *unknown.DeepCopy()
		}
	}
	if !static && !terminal(s.Phase) {
		s.Phase = corev1.PodFailed
	}
	return s
}

// sameStatus reports whether a and b say the same, ignoring condition
// timestamps.
func sameStatus(a, b *corev1.PodStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := &a.Conditions[i], &b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	ac, bc := *a, *b
	ac.Conditions, bc.Conditions = nil, nil
	return podequal.Status(&ac, &bc)
}

// target is the status to write over the API's status api, given the
// node's status s: the node's conditions with the API's timestamps where
// their status is the same, every condition the node does not own as the API
// has it, the fields others own (resource claim statuses, nominated node,
// QoS class when the node has none) from the API, and the API's start time
// and terminal phase kept. It does not change api or s.
func target(api, s *corev1.PodStatus, now time.Time) corev1.PodStatus {
	out := *s.DeepCopy()
	conds := make([]corev1.PodCondition, 0, len(api.Conditions)+len(s.Conditions))
	for _, c := range api.Conditions {
		if ownedByNode(c.Type) {
			continue
		}
		if c.Type == corev1.DisruptionTarget && findCondition(s.Conditions, c.Type) != nil {
			continue
		}
		conds = append(conds, c)
	}
	for _, c := range s.Conditions {
		if !ownedByNode(c.Type) && c.Type != corev1.DisruptionTarget {
			continue
		}
		if a := findCondition(api.Conditions, c.Type); a != nil && a.Status == c.Status {
			c.LastTransitionTime = a.LastTransitionTime
			if c.Reason == a.Reason && c.Message == a.Message {
				c.LastProbeTime = a.LastProbeTime
			}
		}
		conds = append(conds, c)
	}
	out.Conditions = conds
	out.ResourceClaimStatuses = api.ResourceClaimStatuses
	out.ExtendedResourceClaimStatus = api.ExtendedResourceClaimStatus
	out.NodeAllocatableResourceClaimStatuses = api.NodeAllocatableResourceClaimStatuses
	if out.NominatedNodeName == "" {
		out.NominatedNodeName = api.NominatedNodeName
	}
	if out.QOSClass == "" {
		out.QOSClass = api.QOSClass
	}
	if len(out.VolumeHealth) == 0 {
		out.VolumeHealth = api.VolumeHealth
	}
	if api.StartTime != nil && !api.StartTime.IsZero() {
		out.StartTime = api.StartTime.DeepCopy()
	}
	out.ObservedGeneration = max(out.ObservedGeneration, api.ObservedGeneration)
	keepTerminal(&out, api)
	notReadyIfTerminal(&out, metav1.NewTime(now).Rfc3339Copy())
	return out
}

// statusPatch returns the strategic-merge patch of pods/status that turns
// the API's status api into want, with metadata.uid as a precondition and
// nothing else of the metadata; nil when want says nothing api does not.
// Conditions merge by type, so the patch names only the conditions that
// changed, and it carries no element-order list for them (the API keeps
// its order; new conditions come last).
func statusPatch(uid types.UID, api, want *corev1.PodStatus) ([]byte, error) {
	if podequal.Status(api, want) {
		// The same JSON, so no patch: found without encoding either.
		return nil, nil
	}
	fields, err := quickPatchFields(api, want)
	if err == nil {
		return assemblePatch(uid, fields)
	}
	if !errors.Is(err, errQuickPatch) {
		return nil, err
	}
	return libraryStatusPatch(uid, api, want)
}

// libraryStatusPatch is statusPatch computed by the strategic-merge
// library, as the kubelet computes it.
func libraryStatusPatch(uid types.UID, api, want *corev1.PodStatus) ([]byte, error) {
	from, err := json.Marshal(corev1.Pod{Status: *api})
	if err != nil {
		return nil, fmt.Errorf("encoding the API's status: %w", err)
	}
	to, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *want})
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	raw, err := strategicpatch.CreateTwoWayMergePatch(from, to, corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("computing the status patch: %w", err)
	}
	var p struct {
		Metadata json.RawMessage            `json:"metadata"`
		Status   map[string]json.RawMessage `json:"status,omitempty"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("reading the status patch: %w", err)
	}
	return assemblePatch(uid, p.Status)
}

// quickPatchFields is quickStatusPatch of the two statuses.
func quickPatchFields(api, want *corev1.PodStatus) (map[string]json.RawMessage, error) {
	from, err := json.Marshal(api)
	if err != nil {
		return nil, fmt.Errorf("encoding the API's status: %w", err)
	}
	to, err := json.Marshal(want)
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	return quickStatusPatch(from, to)
}

// assemblePatch returns the patch of the status fields given, with
// metadata.uid as a precondition and no element order for the conditions;
// nil when no field is left.
func assemblePatch(uid types.UID, status map[string]json.RawMessage) ([]byte, error) {
	delete(status, "$setElementOrder/conditions")
	if len(status) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	b.WriteString(`{"metadata":{"uid":`)
	id, _ := json.Marshal(string(uid))
	b.Write(id)
	b.WriteString(`},"status":`)
	st, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encoding the status patch: %w", err)
	}
	b.Write(st)
	b.WriteString("}")
	return b.Bytes(), nil
}
