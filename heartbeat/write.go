package heartbeat

import (
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

const (
	strategicMergePatchType = types.StrategicMergePatchType
	applyPatchType          = types.ApplyPatchType
)

// strategicPatch returns the strategic-merge patch from base to computed,
// leaving the spec out. Addresses are replaced as a whole: their merge key in
// the schema does not identify an address, so a merged list would be wrong.
func strategicPatch(base, computed *corev1.Node) ([]byte, error) {
	oldJSON, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	diff := *computed
	diff.Spec = base.Spec
	replaceAddresses := len(base.Status.Addresses) > 0 && !apiequality.Semantic.DeepEqual(base.Status.Addresses, computed.Status.Addresses)
	if replaceAddresses {
		diff.Status.Addresses = base.Status.Addresses
	}
	newJSON, err := json.Marshal(&diff)
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Node{})
	if err != nil || !replaceAddresses {
		return patch, err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	addrs := make([]any, 0, len(computed.Status.Addresses)+1)
	for _, a := range computed.Status.Addresses {
		addrs = append(addrs, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	status["addresses"] = append(addrs, map[string]any{"$patch": "replace"})
	return json.Marshal(m)
}

// ownedConditions returns the condition types the agent applies: those it
// applied before and still computes, and those its setters changed (every
// setter that follows kubelet's rules bumps its conditions' heartbeat times).
// Conditions copied unchanged from the node as read belong to others.
func ownedConditions(prev []corev1.NodeConditionType, base, computed []corev1.NodeCondition) []corev1.NodeConditionType {
	var out []corev1.NodeConditionType
	for i := range computed {
		c := &computed[i]
		owned := slices.Contains(prev, c.Type)
		if !owned {
			j := slices.IndexFunc(base, func(b corev1.NodeCondition) bool { return b.Type == c.Type })
			owned = j < 0 || !apiequality.Semantic.DeepEqual(base[j], *c)
		}
		if owned && !slices.Contains(out, c.Type) {
			out = append(out, c.Type)
		}
	}
	if slices.Equal(out, prev) {
		return prev
	}
	return out
}

// applyBody returns the server-side apply request for status with only the
// owned condition types and the labels the agent keeps on its Node, empty
// fields pruned so that the agent does not take ownership of fields it does
// not fill in.
func applyBody(name string, labels []label, status *corev1.NodeStatus, owned []corev1.NodeConditionType) ([]byte, error) {
	st := *status
	st.Conditions = nil
	for _, c := range status.Conditions {
		if slices.Contains(owned, c.Type) {
			st.Conditions = append(st.Conditions, c)
		}
	}
	raw, err := json.Marshal(&st)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	pruned, _ := prune(m).(map[string]any)
	if pruned == nil {
		pruned = map[string]any{}
	}
	meta := map[string]any{"name": name}
	if len(labels) > 0 {
		m := make(map[string]string, len(labels))
		for _, l := range labels {
			m[l.key] = l.value
		}
		meta["labels"] = m
	}
	return json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Node",
		"metadata":   meta,
		"status":     pruned,
	})
}

// prune drops empty strings, zero numbers, nulls and empty objects and lists.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if p := prune(e); p == nil {
				delete(t, k)
			} else {
				t[k] = p
			}
		}
		if len(t) == 0 {
			return nil
		}
		return t
	case []any:
		out := t[:0]
		for _, e := range t {
			if p := prune(e); p != nil {
				out = append(out, p)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case string:
		if t == "" {
			return nil
		}
	case float64:
		if t == 0 {
			return nil
		}
	case nil:
		return nil
	}
	return v
}

// StatusChanged reports whether status differs from original, ignoring the
// conditions' heartbeat times and their order. Every field is compared
// explicitly (quantities by value, as semantic equality does), without
// reflection: a status round runs this on every node every 10s.
func StatusChanged(original, status *corev1.NodeStatus) bool {
	o, s := original, status
	return !conditionsEqual(o.Conditions, s.Conditions) ||
		!imagesEqual(o.Images, s.Images) ||
		!resourcesEqual(o.Capacity, s.Capacity) ||
		!resourcesEqual(o.Allocatable, s.Allocatable) ||
		o.Phase != s.Phase ||
		!slices.Equal(o.Addresses, s.Addresses) ||
		o.DaemonEndpoints != s.DaemonEndpoints ||
		!nodeInfoEqual(&o.NodeInfo, &s.NodeInfo) ||
		!slices.Equal(o.VolumesInUse, s.VolumesInUse) ||
		!slices.Equal(o.VolumesAttached, s.VolumesAttached) ||
		!configEqual(o.Config, s.Config) ||
		!slices.EqualFunc(o.RuntimeHandlers, s.RuntimeHandlers, runtimeHandlerEqual) ||
		!featuresEqual(o.Features, s.Features) ||
		!slices.Equal(o.DeclaredFeatures, s.DeclaredFeatures)
}

func nodeInfoEqual(a, b *corev1.NodeSystemInfo) bool {
	x, y := *a, *b
	x.Swap, y.Swap = nil, nil
	x.RunningInUserNamespace, y.RunningInUserNamespace = nil, nil
	return x == y && ptrEqual(a.RunningInUserNamespace, b.RunningInUserNamespace) &&
		(a.Swap == nil) == (b.Swap == nil) && (a.Swap == nil || ptrEqual(a.Swap.Capacity, b.Swap.Capacity))
}

func configEqual(a, b *corev1.NodeConfigStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return apiequality.Semantic.DeepEqual(a, b) // rare: dynamic kubelet config
}

func runtimeHandlerEqual(a, b corev1.NodeRuntimeHandler) bool {
	if a.Name != b.Name || (a.Features == nil) != (b.Features == nil) {
		return false
	}
	return a.Features == nil || (ptrEqual(a.Features.RecursiveReadOnlyMounts, b.Features.RecursiveReadOnlyMounts) &&
		ptrEqual(a.Features.UserNamespaces, b.Features.UserNamespaces))
}

func featuresEqual(a, b *corev1.NodeFeatures) bool {
	if a == nil || b == nil {
		return a == b
	}
	return ptrEqual(a.SupplementalGroupsPolicy, b.SupplementalGroupsPolicy)
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// conditionsEqual compares conditions matched by type, heartbeat times left
// out.
func conditionsEqual(a, b []corev1.NodeCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		j := slices.IndexFunc(b, func(c corev1.NodeCondition) bool { return c.Type == a[i].Type })
		if j < 0 {
			return false
		}
		x, y := &a[i], &b[j]
		if x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			!x.LastTransitionTime.Equal(&y.LastTransitionTime) {
			return false
		}
	}
	return true
}

func imagesEqual(a, b []corev1.ContainerImage) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ContainerImage) bool {
		return x.SizeBytes == y.SizeBytes && slices.Equal(x.Names, y.Names)
	})
}

// resourcesEqual compares quantities by value, as semantic equality does.
func resourcesEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}
