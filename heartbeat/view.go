package heartbeat

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
)

// NodeView is where a Heartbeat publishes the Node as it last read or wrote
// it, for readers elsewhere in an agent (admission, mirror pods, the pod
// data's default limits). It exists before the Heartbeat does, so that
// parts built before the node half can be given it (Options.View): until
// the Heartbeat has registered or found the Node, Node returns nil and
// Registered false. Readers never wait on the network. The zero NodeView is
// not usable; use NewNodeView.
type NodeView struct {
	node       atomic.Pointer[lastNode]
	shared     atomic.Pointer[sharedNode]
	registered atomic.Bool
	once       sync.Once
	first      chan struct{} // closed when the Node is first known
}

// NewNodeView returns an empty view.
func NewNodeView() *NodeView { return &NodeView{first: make(chan struct{})} }

// RegisteredC returns a channel closed once the Node has first been known
// to exist; it stays closed if the Node is deleted later (Registered then
// reports false again).
func (v *NodeView) RegisteredC() <-chan struct{} { return v.first }

func (v *NodeView) setRegistered(ok bool) {
	v.registered.Store(ok)
	if ok {
		v.once.Do(func() { close(v.first) })
	}
}

// Node returns a copy of the node as last read or written, or nil.
func (v *NodeView) Node() *corev1.Node {
	n, err := v.node.Load().get()
	if err != nil {
		return nil
	}
	return n
}

// Shared returns the node as Node does, but decoded once per change of the
// Node and shared by every caller: it must not be modified. For readers
// that ask often (a hollow node's pods, admitted and addressed against it).
func (v *NodeView) Shared() *corev1.Node {
	l := v.node.Load()
	if l == nil {
		return nil
	}
	if s := v.shared.Load(); s != nil && s.from == l {
		return s.node
	}
	n, err := l.get()
	if err != nil {
		return nil
	}
	v.shared.Store(&sharedNode{from: l, node: n})
	return n
}

// sharedNode is a Node decoded from the lastNode it came from.
type sharedNode struct {
	from *lastNode
	node *corev1.Node
}

// Registered reports whether the Node is known to exist.
func (v *NodeView) Registered() bool { return v.registered.Load() }
