package heartbeat

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/randutil"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
)

// WriteMode is how the status is written to the nodes/status subresource.
type WriteMode int

const (
	// StrategicMergePatch sends a strategic-merge patch from the node as read
	// to the node as computed, as kubelet does. Conditions merge by type, so
	// conditions written by other agents are kept.
	StrategicMergePatch WriteMode = iota
	// ServerSideApply applies the status the agent owns under
	// Options.FieldManager: every field its setters fill in, and only the
	// condition types its setters wrote. Other managers' conditions are
	// never part of the request.
	ServerSideApply
)

func (m WriteMode) String() string {
	switch m {
	case StrategicMergePatch:
		return "StrategicMergePatch"
	case ServerSideApply:
		return "ServerSideApply"
	}
	return fmt.Sprintf("WriteMode(%d)", int(m))
}

// Defaults and bounds of Options.
const (
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	DefaultJitter                    = 0.04
	DefaultRegisterBackoff           = 100 * time.Millisecond
	DefaultMaxRegisterBackoff        = 7 * time.Second
	DefaultFastStatusInterval        = 100 * time.Millisecond
	DefaultNodeReadyGracePeriod      = 120 * time.Second
	DefaultFieldManager              = "nodekit"
	// MaxStatusAttempts is the number of attempts of one status round: the
	// first from the last known node, the others from a fresh GET.
	MaxStatusAttempts = 5
	// RepeatedFailures is the number of consecutive failed requests after
	// which Options.OnRepeatedFailure is called: kubelet calls its hook from
	// the second failed attempt on.
	RepeatedFailures = 2

	minFrequency       = 100 * time.Millisecond
	maxFrequency       = time.Hour
	maxReport          = 24 * time.Hour
	minBackoff         = 10 * time.Millisecond
	maxGrace           = time.Hour
	maxRegisterBackoff = 10 * time.Minute
)

// DefaultManagedLabels are the labels the agent reconciles on an existing Node
// at registration, from the template's values: kubelet's default labels.
var DefaultManagedLabels = []string{
	corev1.LabelHostname,
	corev1.LabelTopologyZone,
	corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone,
	corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceTypeStable,
	corev1.LabelInstanceType,
	corev1.LabelOSStable,
	corev1.LabelArchStable,
	corev1.LabelWindowsBuild,
	"beta.kubernetes.io/os",
	"beta.kubernetes.io/arch",
}

// ControllerManagedAttachAnnotation is the annotation by which a node asks the
// attach/detach controller to manage its volumes; it is reconciled at
// registration from the template.
const ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// NodeClient is the part of a client of core/v1 Nodes that a heartbeat
// uses: register (Create), read (Get, and List and Watch of its own Node
// with WatchNode) and patch the status. Its methods are those of client-go's
// typed client, so clientset.CoreV1().Nodes() is one as it is. It is also
// a lease.NodeClient.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, node *corev1.Node, opts metav1.CreateOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// Options configure a Heartbeat. Zero values take the default named in each
// field's comment.
type Options struct {
	// Nodes registers the Node and writes its status:
	// clientset.CoreV1().Nodes(). Required.
	Nodes NodeClient
	// Leases renews the node's lease when the strategy uses one:
	// clientset.CoordinationV1().Leases(lease.DefaultNamespace).
	// Required then (here or in LeaseOptions), unused otherwise.
	Leases lease.LeaseClient
	// NodeName is the Node's name. Required.
	NodeName string
	// Node is the template of the Node to register: labels, annotations,
	// taints, spec. Its name is set to NodeName. Default: an empty Node.
	Node *corev1.Node
	// StatusSetter computes the status, on a copy of the node as last read.
	// Required.
	StatusSetter nodestatus.StatusSetter
	// Strategy decides when status is posted and whether a lease is used.
	// Default: LeaseStrategy().
	Strategy HeartbeatStrategy
	// NodeStatusUpdateFrequency is how often status is computed (and, with
	// StatusOnly, posted). Between 100ms and 1h. Default: 10s.
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency is how often an unchanged status is posted
	// with the Lease strategy. Between 100ms and 24h. Default: 5m, or
	// NodeStatusUpdateFrequency when that is set and this is not (as
	// kubelet).
	NodeStatusReportFrequency time.Duration
	// Jitter is the largest fraction of the update frequency added at random
	// to each wait, between 0 and 1. Zero means 0.04; negative turns it off.
	Jitter float64
	// DisableRegistration: the Node is created by someone else; the agent
	// only reads it and writes its status. Default false (register).
	DisableRegistration bool
	// ReRegister: a Node deleted while the agent runs is created again
	// (with a new UID; the lease's owner reference follows). Default false:
	// kubelet registers once per process, and a deleted Node stays deleted
	// until the agent restarts.
	ReRegister bool
	// DisableNodeWatch: Run does not watch the own Node, and status rounds
	// compare against the node as this agent last read or wrote it, so a
	// status written by others (the node lifecycle controller's
	// Ready=Unknown) is not seen until the next post. Default false: Run
	// keeps one LIST+WATCH of the Node (field selector metadata.name),
	// as kubelet's node informer. SyncOnce alone never watches.
	DisableNodeWatch bool
	// RegisterBackoff is the first wait after a failed registration; it
	// doubles up to MaxRegisterBackoff. Between 10ms and MaxRegisterBackoff.
	// Default: 100ms.
	RegisterBackoff time.Duration
	// MaxRegisterBackoff caps the registration back-off. At most 10m.
	// Default: 7s.
	MaxRegisterBackoff time.Duration
	// ManagedLabels are reconciled from the template onto an existing Node
	// at registration. Default: DefaultManagedLabels.
	ManagedLabels []string
	// FastStatusInterval is the period of the start-up fast status check
	// that posts as soon as the node turns Ready. Between 10ms and the update
	// frequency. Default: 100ms.
	FastStatusInterval time.Duration
	// NodeReadyGracePeriod is how long fast status checks go on after
	// registration when the node does not turn Ready. At most 1h. Zero means
	// 120s; negative turns fast status checks off.
	NodeReadyGracePeriod time.Duration
	// WriteMode is how status is written. Default: StrategicMergePatch.
	WriteMode WriteMode
	// FieldManager names the writer in managedFields. Default: "nodekit".
	FieldManager string
	// RequestTimeout bounds each request (wall time). Zero means
	// min(NodeStatusUpdateFrequency, lease duration) as kubelet's heartbeat
	// client; negative means none other than ctx's.
	RequestTimeout time.Duration
	// OnRepeatedFailure, when set, is called from a status step after
	// RepeatedFailures (2) consecutive failed requests, and after each
	// further one, as kubelet's onRepeatedHeartbeatFailure; kubelet closes
	// its API connections there so that a dead TCP connection is not
	// reused. It is also the lease renewer's hook when LeaseOptions sets
	// none. Default: none.
	OnRepeatedFailure func()
	// Clock is the source of time. Default: clock.RealClock{}.
	Clock clock.Clock
	// Registerer registers the heartbeat's metrics (and the lease's, when
	// LeaseOptions sets none). Heartbeats sharing a registerer share
	// metrics. Nil: no metrics.
	Registerer prometheus.Registerer
	// Recorder records NodeReady / NodeNotReady events. Nil: none.
	Recorder record.EventRecorder
	// Rand returns numbers in [0,1) for jitter and report spreading.
	// Default: math/rand/v2.Float64.
	Rand func() float64
	// View is where the heartbeat publishes the node for other readers
	// (Heartbeat.Node and Registered read it too), so that parts built
	// before the heartbeat can be given the view. Default: a view of its
	// own (Heartbeat.View).
	View *NodeView
	// LeaseOptions configure the node's lease when the strategy uses one:
	// New builds the heartbeat's renewer (Heartbeat.Renewer) from them.
	// Leases, Nodes, NodeName, Clock, Registerer, Rand and
	// OnRepeatedFailure default to this Options' values; the rest to
	// lease.New's defaults (kubelet's: 40s, renewed every 10s).
	LeaseOptions lease.Options
}

// complete checks o and fills in its defaults; with a strategy that uses a
// lease it returns the renewer built from LeaseOptions.
func (o *Options) complete() (*lease.Renewer, error) {
	if o.Nodes == nil {
		return nil, optcheck.Required("heartbeat: Options.Nodes")
	}
	if o.NodeName == "" {
		return nil, optcheck.Required("heartbeat: Options.NodeName")
	}
	if o.StatusSetter == nil {
		return nil, optcheck.Required("heartbeat: Options.StatusSetter")
	}
	if o.Node == nil {
		o.Node = &corev1.Node{}
	}
	if o.Node.Name != "" && o.Node.Name != o.NodeName {
		return nil, fmt.Errorf("heartbeat: Options.Node.Name %q differs from Options.NodeName %q", o.Node.Name, o.NodeName)
	}
	if o.Strategy == nil {
		o.Strategy = LeaseStrategy()
	}
	updateSet := o.NodeStatusUpdateFrequency != 0
	if !updateSet {
		o.NodeStatusUpdateFrequency = DefaultNodeStatusUpdateFrequency
	}
	if err := optcheck.Range("heartbeat: Options.NodeStatusUpdateFrequency", o.NodeStatusUpdateFrequency, minFrequency, maxFrequency); err != nil {
		return nil, err
	}
	if o.NodeStatusReportFrequency == 0 {
		if updateSet {
			o.NodeStatusReportFrequency = o.NodeStatusUpdateFrequency
		} else {
			o.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
		}
	}
	if err := optcheck.Range("heartbeat: Options.NodeStatusReportFrequency", o.NodeStatusReportFrequency, minFrequency, maxReport); err != nil {
		return nil, err
	}
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case o.Jitter < 0:
		o.Jitter = 0
	case o.Jitter > 1:
		return nil, optcheck.Range("heartbeat: Options.Jitter", o.Jitter, 0, 1)
	}
	if o.RegisterBackoff == 0 {
		o.RegisterBackoff = DefaultRegisterBackoff
	}
	if o.MaxRegisterBackoff == 0 {
		o.MaxRegisterBackoff = max(DefaultMaxRegisterBackoff, o.RegisterBackoff)
	}
	if err := optcheck.Range("heartbeat: Options.MaxRegisterBackoff", o.MaxRegisterBackoff, minBackoff, maxRegisterBackoff); err != nil {
		return nil, err
	}
	if _, err := backoff.New("heartbeat: Options.RegisterBackoff", o.RegisterBackoff, o.MaxRegisterBackoff, minBackoff); err != nil {
		return nil, err
	}
	if o.ManagedLabels == nil {
		o.ManagedLabels = DefaultManagedLabels
	}
	if o.FastStatusInterval == 0 {
		o.FastStatusInterval = DefaultFastStatusInterval
	}
	if err := optcheck.Range("heartbeat: Options.FastStatusInterval", o.FastStatusInterval, minBackoff, o.NodeStatusUpdateFrequency); err != nil {
		return nil, err
	}
	switch {
	case o.NodeReadyGracePeriod == 0:
		o.NodeReadyGracePeriod = DefaultNodeReadyGracePeriod
	case o.NodeReadyGracePeriod < 0:
		o.NodeReadyGracePeriod = 0
	case o.NodeReadyGracePeriod > maxGrace:
		return nil, optcheck.Range("heartbeat: Options.NodeReadyGracePeriod", o.NodeReadyGracePeriod, 0, maxGrace)
	}
	if o.WriteMode != StrategicMergePatch && o.WriteMode != ServerSideApply {
		return nil, fmt.Errorf("heartbeat: Options.WriteMode %v is unknown", o.WriteMode)
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	o.Rand = randutil.Or(o.Rand)
	var renewer *lease.Renewer
	if o.Strategy.UsesLease() {
		lo := o.LeaseOptions
		if lo.Leases == nil {
			lo.Leases = o.Leases
		}
		if lo.Leases == nil {
			return nil, fmt.Errorf("%w with a strategy that uses a lease", optcheck.Required("heartbeat: Options.Leases"))
		}
		if lo.Nodes == nil {
			lo.Nodes = o.Nodes
		}
		if lo.NodeName == "" {
			lo.NodeName = o.NodeName
		}
		if lo.NodeName != o.NodeName {
			return nil, fmt.Errorf("heartbeat: Options.LeaseOptions.NodeName %q differs from Options.NodeName %q", lo.NodeName, o.NodeName)
		}
		if lo.Clock == nil {
			lo.Clock = o.Clock
		}
		if lo.Registerer == nil {
			lo.Registerer = o.Registerer
		}
		if lo.OnRepeatedFailure == nil {
			lo.OnRepeatedFailure = o.OnRepeatedFailure
		}
		if lo.Rand == nil {
			lo.Rand = o.Rand
		}
		var err error
		if renewer, err = lease.New(lo); err != nil {
			return nil, fmt.Errorf("heartbeat: Options.LeaseOptions: %w", err)
		}
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = o.NodeStatusUpdateFrequency
		if renewer != nil {
			o.RequestTimeout = min(o.RequestTimeout, renewer.Duration())
		}
	}
	return renewer, nil
}
