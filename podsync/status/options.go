package status

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
)

// Defaults and bounds of Options.
const (
	// DefaultReconcilePeriod is how often every pod's status is checked
	// against the API's view: 10s, as kubelet's status manager.
	DefaultReconcilePeriod = 10 * time.Second
	// DefaultRetryBackoff is the first wait before a failed write of one pod
	// is retried; it doubles with each further failure.
	DefaultRetryBackoff = 500 * time.Millisecond
	// DefaultMaxRetryBackoff caps the retry wait: the reconcile period, so a
	// failing pod is never retried later than kubelet would retry it.
	DefaultMaxRetryBackoff = 10 * time.Second
	// DefaultMaxParallelWrites is how many pods are written at once.
	DefaultMaxParallelWrites = 4

	// MinReconcilePeriod and MaxReconcilePeriod bound Options.ReconcilePeriod.
	MinReconcilePeriod = time.Second
	MaxReconcilePeriod = time.Hour
	// MinRetryBackoff bounds Options.RetryBackoff from below (its upper bound
	// is MaxRetryBackoff); MaxMaxRetryBackoff bounds Options.MaxRetryBackoff.
	MinRetryBackoff    = 10 * time.Millisecond
	MaxMaxRetryBackoff = 10 * time.Minute
	// MaxPendingDelay bounds Options.PendingDelay.
	MaxPendingDelay = 10 * time.Second
)

// PodClient is the part of a client of core/v1 Pods in one namespace that
// the Writer uses: patch pods/status, read a pod back (get, or a list
// field-selected by name), delete a terminated pod. Its methods are
// client-go's, so clientset.CoreV1().Pods(namespace) is one as it is.
type PodClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Options configure a Writer. Zero values take the default named in each
// field's comment.
type Options struct {
	// Pods returns the client of a namespace's pods, which writes
	// pods/status and deletes pods:
	// func(ns string) status.PodClient { return clientset.CoreV1().Pods(ns) }.
	// A node identity (system:node:<name> under the Node authorizer and
	// NodeRestriction) suffices. Nil: standalone; nothing is written,
	// statuses are still recorded and served by Status.
	Pods func(namespace string) PodClient
	// Clock drives retries and the reconcile period. Default: the real clock.
	Clock clock.WithTicker
	// Registerer registers the request counters (MetricRequests and the
	// others named in metrics.go). Optional; writers sharing one Registerer
	// share the counters.
	Registerer prometheus.Registerer
	// ReconcilePeriod is how often every pod is checked, besides the writes
	// that changes trigger at once. Between 1s and 1h. Default: 10s.
	ReconcilePeriod time.Duration
	// RetryBackoff is the first wait before a pod whose write failed is
	// retried; it doubles per failure up to MaxRetryBackoff. Between 10ms
	// and MaxRetryBackoff. Default: 500ms.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps the retry wait. Between RetryBackoff and 10m.
	// Default: 10s.
	MaxRetryBackoff time.Duration
	// MaxParallelWrites bounds the pods written at once (one request in
	// flight per pod at most). Between 1 and 100. Default: 4.
	MaxParallelWrites int
	// PendingDelay is how long a change that leaves a Pending pod Pending
	// (ContainerCreating, PodInitializing, an image pull) may wait before
	// it is written, so that a pod whose containers start within it costs
	// one write instead of two. A change out of Pending, a deletion and a
	// termination are written at once, with whatever waited. Between 0 and
	// 10s. Default 0: every change at once, as kubelet writes.
	PendingDelay time.Duration
}

// withDefaults returns o with defaults filled in, or an error naming the
// first option out of bounds.
func (o Options) withDefaults() (Options, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.ReconcilePeriod == 0 {
		o.ReconcilePeriod = DefaultReconcilePeriod
	}
	if o.MaxRetryBackoff == 0 {
		o.MaxRetryBackoff = max(DefaultMaxRetryBackoff, o.RetryBackoff)
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = min(DefaultRetryBackoff, o.MaxRetryBackoff)
	}
	if o.MaxParallelWrites == 0 {
		o.MaxParallelWrites = DefaultMaxParallelWrites
	}
	if err := optcheck.Range("status: Options.MaxParallelWrites", o.MaxParallelWrites, 1, 100); err != nil {
		return o, err
	}
	if err := optcheck.Range("status: Options.PendingDelay", o.PendingDelay, 0, MaxPendingDelay); err != nil {
		return o, err
	}
	if err := optcheck.Range("status: Options.ReconcilePeriod", o.ReconcilePeriod, MinReconcilePeriod, MaxReconcilePeriod); err != nil {
		return o, err
	}
	if err := optcheck.Range("status: Options.MaxRetryBackoff", o.MaxRetryBackoff, MinRetryBackoff, MaxMaxRetryBackoff); err != nil {
		return o, err
	}
	if err := optcheck.Range("status: Options.RetryBackoff", o.RetryBackoff, MinRetryBackoff, o.MaxRetryBackoff); err != nil {
		return o, err
	}
	return o, nil
}
