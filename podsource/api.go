package podsource

import (
	"context"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/listwatch"
	"github.com/nodekit/nodekit/internal/optcheck"
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
	// MaxRetryWait bounds the wait between two attempts to list again
	// after the watch or a list failed: waits grow from 0.8s, doubling, to
	// between two thirds of it and all of it. Default DefaultMaxRetryWait
	// (10s); at least 1s, at most 10m. kubelet keeps client-go's (30s,
	// jittered up to 60s), so after an API server outage it may see a pod
	// deleted meanwhile, and stop it, a minute late.
	MaxRetryWait time.Duration
	// Clock drives the reflector's back-off. Default the real clock.
	Clock clock.Clock
}

// DefaultMaxRetryWait is APIOptions.MaxRetryWait's default.
const DefaultMaxRetryWait = 10 * time.Second

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
	maxWait  time.Duration
	clock    clock.Clock
}

// NewAPI checks the options and returns an API source.
func NewAPI(opts APIOptions) (*API, error) {
	if opts.Pods == nil {
		return nil, optcheck.Required("podsource: APIOptions.Pods")
	}
	if err := checkNodeName("APIOptions", &opts.NodeName); err != nil {
		return nil, err
	}
	switch {
	case opts.MaxRetryWait == 0:
		opts.MaxRetryWait = DefaultMaxRetryWait
	case opts.MaxRetryWait < time.Second || opts.MaxRetryWait > 10*time.Minute:
		return nil, optcheck.Range("podsource: APIOptions.MaxRetryWait", opts.MaxRetryWait, time.Second, 10*time.Minute)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &API{pods: opts.Pods, nodeName: opts.NodeName, maxWait: opts.MaxRetryWait, clock: opts.Clock}, nil
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
	// Jitter adds up to half of a wait: the cap is two thirds of maxWait.
	const first = 800 * time.Millisecond
	capWait := a.maxWait * 2 / 3
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, store, cache.ReflectorOptions{
		Name:   "podsource-api",
		Logger: &logger,
		Clock:  a.clock,
		Backoff: &wait.Backoff{
			Duration: min(first, capWait),
			Factor:   2,
			Jitter:   0.5,
			Cap:      capWait,
			Steps:    math.MaxInt32,
		},
	})
	r.RunWithContext(ctx)
	return nil
}
