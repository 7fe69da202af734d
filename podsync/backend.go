package podsync

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/probe"
)

// NodeSource is the Node as last registered or read, for the parts of a pod
// half that need it (admission, mirror pods, the downward API's default
// limits). heartbeat.Heartbeat and heartbeat.NodeView are NodeSources.
// Node returns nil while no Node is known; it never waits on the network.
type NodeSource interface {
	Node() *corev1.Node
}

// RuntimeStatusSource is the runtime's status as a backend last observed
// it, for the node's Ready condition (nodestatus.RuntimeStatusSource).
type RuntimeStatusSource interface {
	LatestRuntimeStatus() (*runtimeapi.StatusResponse, time.Time, error)
}

// RuntimeClasses resolves a pod's spec.runtimeClassName to the runtime
// handler its sandbox runs with, as the kubelet's RuntimeClass manager:
// "" for no name, an error (apierrors.IsNotFound) for a class that does
// not exist. podsync/runtimeclass's Manager is one.
type RuntimeClasses interface {
	LookupRuntimeHandler(ctx context.Context, runtimeClassName *string) (string, error)
}

// BackendParts are what a pod half has built when it builds its backend:
// everything a backend may need from the rest of the agent, resolved in
// construction order.
type BackendParts struct {
	// NodeName is the node's name.
	NodeName string
	// HostIPs are the node's addresses.
	HostIPs []string
	// Node is the node as registered; nil when the agent has no API server.
	Node NodeSource
	// Probes runs the pods' probes; nil when the pod half runs none.
	Probes *probe.Manager
	// RuntimeClasses resolves the pods' RuntimeClasses; the pod half's
	// is never nil (without an API server it finds no class).
	RuntimeClasses RuntimeClasses
	// Triggers asks the engine to sync a pod soon (a Secret the pod uses
	// changed, say).
	Triggers *Triggers
	// Clock, Recorder and Registerer are the agent's.
	Clock      clock.WithTicker
	Recorder   record.EventRecorder
	Registerer prometheus.Registerer
}

// BackendRunnable is a loop a backend needs run beside the engine (the
// pods' data, usage sampling, log rotation).
type BackendRunnable struct {
	Name string
	Run  func(ctx context.Context) error
}

// Backend is what a backend gives a pod half. Only Syncer is required.
type Backend struct {
	// Syncer runs the pods.
	Syncer PodSyncer
	// Relister observes them. Default: Syncer, which must then be one.
	Relister Relister
	// Runnables run beside the engine, started before it, in order.
	Runnables []BackendRunnable
	// RuntimeStatus is the node's runtime status for its Ready condition;
	// nil: the backend has no runtime to report on.
	RuntimeStatus RuntimeStatusSource
	// Observer samples the node's resources for kubelet's eviction manager;
	// nil: no eviction (nothing to observe).
	Observer eviction.Observer
	// Reclaimers free node resources before pods are evicted (dead
	// containers, then unused images), in order.
	Reclaimers []eviction.Reclaimer
}

// BackendFunc builds a pod half's backend from the parts built before it.
type BackendFunc func(BackendParts) (Backend, error)

// Triggers collects requests to sync pods soon, from parts built before the
// engine (a backend's pod data manager, say), and hands them to the engine
// given them in Options.Triggers. Trigger never blocks; requests for one
// pod made before the engine took them count once.
type Triggers struct {
	mu      sync.Mutex
	pending map[types.UID]struct{}
	wake    chan struct{}
}

// NewTriggers returns an empty Triggers.
func NewTriggers() *Triggers {
	return &Triggers{pending: map[types.UID]struct{}{}, wake: make(chan struct{}, 1)}
}

// Trigger asks for pod uid to be synced soon.
func (t *Triggers) Trigger(uid types.UID) {
	t.mu.Lock()
	t.pending[uid] = struct{}{}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// take returns and forgets the pending requests.
func (t *Triggers) take() []types.UID {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 {
		return nil
	}
	uids := make([]types.UID, 0, len(t.pending))
	for uid := range t.pending {
		uids = append(uids, uid)
	}
	clear(t.pending)
	return uids
}
