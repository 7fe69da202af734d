package heartbeat

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// lastNode is the node as last read or written, protobuf-encoded, with
// managedFields dropped. It is immutable once made, so it is published
// through an atomic pointer and read without a lock. The encoded form takes
// about a third of the memory of the decoded object, which matters when one
// process runs thousands of heartbeats; each status round decodes a fresh
// copy to compute on, where it would otherwise have deep-copied the object.
type lastNode struct {
	raw   []byte
	uid   types.UID
	rv    string
	ready corev1.ConditionStatus
}

// newLastNode encodes n, which the caller no longer modifies.
func newLastNode(n *corev1.Node) (*lastNode, error) {
	n.ManagedFields = nil
	raw, err := n.Marshal()
	if err != nil {
		return nil, fmt.Errorf("heartbeat: encode node %q: %w", n.Name, err)
	}
	return &lastNode{raw: raw, uid: n.UID, rv: n.ResourceVersion, ready: readyStatus(n)}, nil
}

// get returns a new copy of the node, or nil for a nil lastNode.
func (l *lastNode) get() (*corev1.Node, error) {
	if l == nil {
		return nil, nil
	}
	n := &corev1.Node{}
	if err := n.Unmarshal(l.raw); err != nil {
		return nil, fmt.Errorf("heartbeat: decode node: %w", err)
	}
	return n, nil
}

// newerThan reports whether resource version a is newer than b. Resource
// versions are opaque to clients in general; the API server's are etcd
// revisions, increasing integers, which is what this compares. An
// unparsable version is taken as newer, so that what the API server sent
// last wins.
func newerThan(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}
