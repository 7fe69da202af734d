package nodekit

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/nodestatus"
)

// NodeHalfOptions configure NewNodeHalf. The zero value of each field means
// its default.
type NodeHalfOptions struct {
	// NodeName is the node's name. Required.
	NodeName string
	// API is the API server (Client.API). Required, with Nodes and
	// Leases.
	API *API
	// Node is the Node to register. Default: NodeTemplate(NodeName, nil).
	Node *corev1.Node
	// Status configures the kubelet's default setters (Hostname defaults
	// to NodeName; Runtime is required unless Setters is set; RuntimeStatus
	// defaults to the pod half's). Ignored when Setters is set.
	Status nodestatus.Options
	// Setters replaces the default setters. The pod half's pressure
	// conditions still replace the setters named SetterMemoryPressure,
	// SetterDiskPressure and SetterPIDPressure. Default:
	// nodestatus.DefaultSetters(Status).
	Setters nodestatus.Setters
	// CustomSetters are the agent's own setters (a disk-usage condition,
	// hardware health), inserted in order before SetterReady, which reads
	// what the others found. Default none.
	CustomSetters []nodestatus.Named
	// Pods is the agent's pod half, built first: the node reports its
	// runtime status (Ready) and its eviction manager's pressure
	// conditions, and publishes the Node to the pod half's view.
	// Default nil: a node without pods.
	Pods *PodHalf
	// Heartbeat holds the heartbeat's other options (strategy,
	// frequencies, registration, LeaseOptions, write mode). Nodes, Leases,
	// NodeName, Node, StatusSetter, View, Clock, Registerer, Recorder and
	// OnRepeatedFailure are set by NewNodeHalf and must be left empty.
	// Default: kubelet's (the lease strategy).
	Heartbeat heartbeat.Options
	// Clock drives the heartbeat. Default clock.RealClock{}.
	Clock clock.WithTicker
	// Registerer receives the heartbeat's and the lease's metrics. Default
	// nil: none.
	Registerer prometheus.Registerer
	// Recorder receives the node's events. Default: the pod half's, else
	// none.
	Recorder record.EventRecorder
}

// NodeHalf is the node half of an agent: the Node's registration, its
// status from the setters, and its lease, as a heartbeat.
type NodeHalf struct {
	setters   nodestatus.Setters
	heartbeat *heartbeat.Heartbeat
}

// NewNodeHalf builds the node half. It makes no request.
func NewNodeHalf(o NodeHalfOptions) (*NodeHalf, error) {
	switch {
	case o.NodeName == "":
		return nil, optcheck.Required("nodekit: NodeHalfOptions.NodeName")
	case o.API == nil || o.API.Nodes == nil || o.API.Leases == nil:
		return nil, errors.New("nodekit: NodeHalfOptions.API with Nodes and Leases is required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Node == nil {
		o.Node = NodeTemplate(o.NodeName, nil)
	}
	if o.Recorder == nil && o.Pods != nil {
		o.Recorder = o.Pods.Recorder()
	}
	setters := o.Setters
	if setters == nil {
		so := o.Status
		if so.Hostname == "" {
			so.Hostname = o.NodeName
		}
		if so.RuntimeStatus == nil && o.Pods != nil && o.Pods.runtimeStatus != nil {
			so.RuntimeStatus = o.Pods.runtimeStatus
		}
		if so.Clock == nil {
			so.Clock = o.Clock
		}
		var err error
		if setters, err = nodestatus.DefaultSetters(so); err != nil {
			return nil, err
		}
	}
	var err error
	if o.Pods != nil {
		if setters, err = o.Pods.pressureSetters(setters); err != nil {
			return nil, err
		}
	}
	for _, c := range o.CustomSetters {
		if setters.Index(nodestatus.SetterReady) < 0 {
			setters = append(setters, c)
		} else if setters, err = setters.InsertBefore(nodestatus.SetterReady, c); err != nil {
			return nil, err
		}
	}
	ho := o.Heartbeat
	if ho.Nodes != nil || ho.Leases != nil || ho.NodeName != "" || ho.Node != nil || ho.StatusSetter != nil || ho.View != nil {
		return nil, errors.New("nodekit: NodeHalfOptions.Heartbeat: Nodes, Leases, NodeName, Node, StatusSetter and View are set by NewNodeHalf")
	}
	ho.Nodes, ho.Leases = o.API.Nodes, o.API.Leases
	ho.NodeName, ho.Node, ho.StatusSetter = o.NodeName, o.Node, setters
	if ho.Strategy == nil {
		ho.Strategy = heartbeat.LeaseStrategy()
	}
	if o.Pods != nil {
		ho.View = o.Pods.View()
	}
	ho.Clock, ho.Registerer, ho.Recorder = o.Clock, o.Registerer, o.Recorder
	if ho.OnRepeatedFailure == nil {
		ho.OnRepeatedFailure = o.API.CloseConnections
	}
	hb, err := heartbeat.New(ho)
	if err != nil {
		return nil, err
	}
	return &NodeHalf{setters: setters, heartbeat: hb}, nil
}

// Heartbeat returns the node's heartbeat.
func (n *NodeHalf) Heartbeat() *heartbeat.Heartbeat { return n.heartbeat }

// Setters returns the status setters the heartbeat runs.
func (n *NodeHalf) Setters() nodestatus.Setters { return n.setters }

// Run runs the heartbeat until ctx ends. The node lease is left to expire,
// as the kubelet leaves it.
func (n *NodeHalf) Run(ctx context.Context) error { return n.heartbeat.Run(ctx) }

// NodeTemplate returns the Node an agent registers as the kubelet does:
// the kubelet's default labels (hostname, OS and architecture, stable and
// beta) with labels added, and the controller-managed attach/detach
// annotation.
func NodeTemplate(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{
		corev1.LabelHostname:      name,
		corev1.LabelOSStable:      goruntime.GOOS,
		corev1.LabelArchStable:    goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      l,
			Annotations: map[string]string{heartbeat.ControllerManagedAttachAnnotation: "true"},
		},
	}
}

// LocalNode returns a function that gives the Node pods are admitted
// against before the Node is registered (static pods arrive first, and the
// kubelet admits them against its own initial node too): node with the
// capacity and allocatable that the MachineInfo setter of opts computes,
// computed once, at the first call.
func LocalNode(node *corev1.Node, opts nodestatus.Options) func() (*corev1.Node, error) {
	return sync.OnceValues(func() (*corev1.Node, error) { return localNode(node, opts) })
}

func localNode(node *corev1.Node, opts nodestatus.Options) (*corev1.Node, error) {
	setters, err := nodestatus.DefaultSetters(opts)
	if err != nil {
		return nil, err
	}
	i := setters.Index(nodestatus.SetterMachineInfo)
	if i < 0 {
		return nil, fmt.Errorf("nodekit: no %s setter", nodestatus.SetterMachineInfo)
	}
	n := node.DeepCopy()
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if err := setters[i:i+1].Run(context.Background(), n, clk.Now()); err != nil {
		return nil, fmt.Errorf("nodekit: node capacity: %w", err)
	}
	return n, nil
}
