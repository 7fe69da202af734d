package heartbeat

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// lastNode holds the node as last read or written, protobuf-encoded, with
// managedFields dropped. The encoded form takes about a third of the memory
// of the decoded object, which matters when one process runs thousands of
// heartbeats; each status round decodes a fresh copy to compute on, where it
// would otherwise have deep-copied the object.
type lastNode struct {
	raw   []byte
	uid   types.UID
	ready corev1.ConditionStatus
	node  *corev1.Node // kept decoded only if it failed to encode
}

// set records n, which the caller no longer modifies.
func (l *lastNode) set(n *corev1.Node) {
	n.ManagedFields = nil
	l.uid, l.ready = n.UID, readyStatus(n)
	raw, err := n.Marshal()
	if err != nil {
		l.raw, l.node = nil, n
		return
	}
	l.raw, l.node = raw, nil
}

func (l *lastNode) clear() { *l = lastNode{} }

func (l *lastNode) empty() bool { return l.raw == nil && l.node == nil }

// get returns a new copy of the node, or nil.
func (l *lastNode) get() *corev1.Node {
	switch {
	case l.node != nil:
		return l.node.DeepCopy()
	case l.raw == nil:
		return nil
	}
	n := &corev1.Node{}
	if err := n.Unmarshal(l.raw); err != nil {
		return nil // not reached: the bytes came from Marshal
	}
	return n
}
