package heartbeat

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shared decodes the node once per change and hands every caller that one
// copy; Node decodes a copy of its own each time.
func TestNodeViewShared(t *testing.T) {
	v := NewNodeView()
	if v.Shared() != nil {
		t.Fatal("Shared before any node: want nil")
	}
	store := func(rv string) {
		l, err := newLastNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: rv}})
		if err != nil {
			t.Fatal(err)
		}
		v.node.Store(l)
	}
	store("1")
	a, b := v.Shared(), v.Shared()
	if a == nil || a != b || a.ResourceVersion != "1" {
		t.Fatalf("Shared twice: %p and %p (version %q), want one copy of version 1", a, b, a.ResourceVersion)
	}
	if n := v.Node(); n == a || n.ResourceVersion != "1" {
		t.Fatalf("Node returned the shared copy or another version (%q)", n.ResourceVersion)
	}
	store("2")
	if c := v.Shared(); c == a || c.ResourceVersion != "2" {
		t.Fatalf("Shared after a change: version %q, same copy %v; want a new copy of version 2", c.ResourceVersion, c == a)
	}
	v.node.Store(nil)
	if v.Shared() != nil {
		t.Fatal("Shared once the node is gone: want nil")
	}
}
