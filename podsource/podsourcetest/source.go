package podsourcetest

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podsource"
)

// Source is a podsource.PodSource whose full sets come from Send. Build it
// with NewSource; it must be running (Run, usually through a Merger) for
// Send to deliver.
type Source struct {
	name string
	ch   chan []*v1.Pod
}

var _ podsource.PodSource = (*Source)(nil)

// NewSource returns a Source with the given name.
func NewSource(name string) *Source {
	return &Source{name: name, ch: make(chan []*v1.Pod)}
}

// Name returns the name given to NewSource.
func (s *Source) Name() string { return s.name }

// Run forwards every set given to Send until ctx ends.
func (s *Source) Run(ctx context.Context, updates chan<- podsource.Update) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case pods := <-s.ch:
			u := podsource.Update{Op: podsource.OpSet, Source: s.name, Pods: pods}
			select {
			case updates <- u:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// Send hands a full set to Run, blocking until Run takes it or ctx ends.
// A nil set is sent as an empty one.
func (s *Source) Send(ctx context.Context, pods ...*v1.Pod) error {
	if pods == nil {
		pods = []*v1.Pod{}
	}
	select {
	case s.ch <- pods:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pod returns a minimal valid pod with one container, bound to node, with
// the UID uid, in namespace "default".
func Pod(name, node string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, UID: uid},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
		},
	}
}
