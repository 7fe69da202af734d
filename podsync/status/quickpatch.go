package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
)

// errQuickPatch: quickStatusPatch does not compute this patch; the
// strategic-merge library does.
var errQuickPatch = errors.New("status: not a patch quickStatusPatch computes")

// mergeKeys are the lists of a pod status that a strategic-merge patch
// merges element by element, by the key named (the API's patchMergeKey);
// every other list is replaced whole.
var mergeKeys = map[string]string{"conditions": "type", "podIPs": "ip", "hostIPs": "ip"}

// quickStatusPatch computes the status part of the patch that
// strategicpatch.CreateTwoWayMergePatch computes between the two encoded
// statuses, without decoding them into generic maps: the same JSON values
// (only a value sent whole keeps its fields in the order the API type
// encodes them, where the library sorts them). A
// field that changed is set to its new value (null when it is gone), a
// list that is replaced whole carries its new elements, and a merged list
// (conditions, podIPs, hostIPs) carries its new order, the elements that
// changed (with only the fields that changed, and the merge key) and a
// delete directive for each element gone. It returns errQuickPatch for
// what it leaves to the library: an object field that changed inside
// (resources, resourceClaimStatuses, ...), and a merged list whose
// elements lack their key, repeat it, or hold objects that changed.
func quickStatusPatch(from, to []byte) (map[string]json.RawMessage, error) {
	var a, b map[string]json.RawMessage
	if err := json.Unmarshal(from, &a); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(to, &b); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = json.RawMessage("null")
		}
	}
	for k, nv := range b {
		old, ok := a[k]
		switch {
		case !ok:
			out[k] = nv
		case bytes.Equal(old, nv):
		case mergeKeys[k] != "" && isList(old) && isList(nv):
			order, list, err := mergeListPatch(mergeKeys[k], old, nv)
			if err != nil {
				return nil, err
			}
			if len(list) > 0 {
				out[k] = list
			}
			out["$setElementOrder/"+k] = order
		case isObject(old) && isObject(nv):
			return nil, errQuickPatch
		case k == "resourceClaimStatuses" || k == "nodeAllocatableResourceClaimStatuses" || k == "volumeHealth":
			// Merged with retainKeys or by keys of their own: the
			// library's.
			return nil, errQuickPatch
		default:
			out[k] = nv
		}
	}
	return out, nil
}

func isList(raw json.RawMessage) bool   { return len(raw) > 0 && raw[0] == '[' }
func isObject(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }

// keyed is one element of a merged list, by its merge key's value.
type keyed struct {
	key    string
	fields map[string]json.RawMessage
}

func keyedList(key string, raw json.RawMessage) ([]keyed, error) {
	var elems []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	out := make([]keyed, 0, len(elems))
	seen := make(map[string]bool, len(elems))
	for _, e := range elems {
		var v string
		if kv, ok := e[key]; !ok || json.Unmarshal(kv, &v) != nil || seen[v] {
			return nil, errQuickPatch
		}
		seen[v] = true
		out = append(out, keyed{key: v, fields: e})
	}
	return out, nil
}

// mergeListPatch returns the $setElementOrder list (the new order, by key)
// and the patch list: the new and changed elements in the new order, then a
// delete directive for each element gone, sorted by key.
func mergeListPatch(key string, from, to json.RawMessage) (order, list json.RawMessage, err error) {
	olds, err := keyedList(key, from)
	if err != nil {
		return nil, nil, err
	}
	news, err := keyedList(key, to)
	if err != nil {
		return nil, nil, err
	}
	byKey := make(map[string]map[string]json.RawMessage, len(olds))
	for _, o := range olds {
		byKey[o.key] = o.fields
	}
	orderList := make([]map[string]json.RawMessage, len(news))
	inNew := make(map[string]bool, len(news))
	for i, n := range news {
		orderList[i] = map[string]json.RawMessage{key: n.fields[key]}
		inNew[n.key] = true
	}
	var patch []json.RawMessage
	for _, n := range news {
		old, ok := byKey[n.key]
		if !ok {
			b, err := json.Marshal(n.fields)
			if err != nil {
				return nil, nil, err
			}
			patch = append(patch, b)
			continue
		}
		diff := map[string]json.RawMessage{}
		for f := range old {
			if _, ok := n.fields[f]; !ok {
				diff[f] = json.RawMessage("null")
			}
		}
		for f, v := range n.fields {
			ov, ok := old[f]
			switch {
			case ok && bytes.Equal(ov, v):
			case ok && isObject(ov) && isObject(v), ok && isList(ov) && isList(v):
				return nil, nil, errQuickPatch
			default:
				diff[f] = v
			}
		}
		if len(diff) == 0 {
			continue
		}
		diff[key] = n.fields[key]
		b, err := json.Marshal(diff)
		if err != nil {
			return nil, nil, err
		}
		patch = append(patch, b)
	}
	gone := make([]keyed, 0)
	for _, o := range olds {
		if !inNew[o.key] {
			gone = append(gone, o)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].key < gone[j].key })
	for _, o := range gone {
		b, err := json.Marshal(map[string]json.RawMessage{"$patch": json.RawMessage(`"delete"`), key: o.fields[key]})
		if err != nil {
			return nil, nil, err
		}
		patch = append(patch, b)
	}
	if order, err = json.Marshal(orderList); err != nil {
		return nil, nil, err
	}
	if len(patch) > 0 {
		if list, err = json.Marshal(patch); err != nil {
			return nil, nil, err
		}
	}
	return order, list, nil
}
