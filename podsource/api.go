package podsource

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/listwatch"
)

// APIPodClient is the part of a client of core/v1 Pods in all namespaces
// that the API source uses, with client-go's signatures:
// clientset.CoreV1().Pods(metav1.NamespaceAll) is one.
type APIPodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// APIOptions configures an API source.
type APIOptions struct {
	// Pods lists and watches the pods of every namespace:
	// clientset.CoreV1().Pods(metav1.NamespaceAll). A node identity
	// (system:node:<name>) suffices. Required.
	Pods APIPodClient
	// NodeName is this node's name. Required.
	NodeName string
	// Clock drives the reflector's back-off. Default the real clock.
	Clock clock.Clock
}

// API is the source of pods bound to this node in the API server: a
// client-go reflector listing and watching pods with the field selector
// spec.nodeName=<node>, the only pod list a node identity may make.
//
// It starts when Run is called. kubelet starts it only once its node
// informer has synced; a caller wanting that calls Run after the Node is
// registered. The first set (possibly empty) is sent once the first list
// succeeded; after that, a set on every change the watch reports. Mirror
// pods are in the set, as in kubelet (see IsMirrorPod).
type API struct {
	pods     APIPodClient
	nodeName string
	clock    clock.Clock
}

// NewAPI checks the options and returns an API source.
func NewAPI(opts APIOptions) (*API, error) {
	if opts.Pods == nil {
		return nil, errors.New("podsource: APIOptions.Pods: required")
	}
	if err := checkNodeName("APIOptions", &opts.NodeName); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &API{pods: opts.Pods, nodeName: opts.NodeName, clock: opts.Clock}, nil
}

// Name returns APISource.
func (a *API) Name() string { return APISource }

// Run lists and watches the node's pods, sending the full set on every
// change, until ctx ends.
func (a *API) Run(ctx context.Context, updates chan<- Update) error {
	logger := klog.FromContext(ctx).WithValues("source", APISource)
	selector := fields.OneTermEqualSelector("spec.nodeName", a.nodeName).String()
	lw := listwatch.Selected(a.pods.List, a.pods.Watch, selector)
	push := func(objs []any) {
		set := make([]*v1.Pod, 0, len(objs))
		for _, o := range objs {
			// The selector is the server's job; this guards clients that
			// ignore it (fakes).
			if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName == a.nodeName {
				set = append(set, p)
			}
		}
		_ = send(ctx, updates, Update{Op: OpSet, Source: APISource, Pods: set})
	}
	store := cache.NewUndeltaStore(push, cache.MetaNamespaceKeyFunc)
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, store, cache.ReflectorOptions{
		Name:   "podsource-api",
		Logger: &logger,
		Clock:  a.clock,
	})
	r.RunWithContext(ctx)
	return nil
}
