package heartbeat

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/internal/listwatch"
)

// watchNode keeps h.seen at the Node as the API server last showed it, until
// ctx ends: one LIST and one long-running WATCH of the own Node (field
// selector metadata.name=<node>, which the Node authorizer allows a node),
// re-established by client-go's reflector when the server closes it. Status
// rounds then see what others wrote (the node lifecycle controller's
// Ready=Unknown) without a GET per round.
func (h *Heartbeat) watchNode(ctx context.Context) {
	sel := fields.OneTermEqualSelector(metav1.ObjectNameField, h.name).String()
	nodes := h.nodes
	lw := listwatch.Selected(nodes.List, nodes.Watch, sel)
	inf := cache.NewSharedInformer(lw, &corev1.Node{}, 0)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.observe(obj) },
		UpdateFunc: func(_, obj any) { h.observe(obj) },
		DeleteFunc: func(any) { h.seen.Store(nil) },
	})
	inf.RunWithContext(ctx)
}

func (h *Heartbeat) observe(obj any) {
	if n, ok := obj.(*corev1.Node); ok && n.Name == h.name {
		c := *n // shallow: the informer's object is shared and never modified
		c.ManagedFields = nil
		h.seen.Store(&c)
	}
}
