package nodekit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/probe"
)

// FleetRelistPeriod is FleetPodsOptions.Engine.RelistPeriod's default.
const FleetRelistPeriod = 30 * time.Second

// FleetResyncPeriod is FleetPodsOptions.Engine.ResyncPeriod's default.
const FleetResyncPeriod = 5 * time.Minute

// FleetPodsOptions configure NewFleetPods.
type FleetPodsOptions struct {
	// API is the API server the pods are read from and their status
	// written to: API.Pods is required, its client's rate limit is the
	// budget all nodes' writes share. API.Events, when set, is not used:
	// give Recorder instead.
	API *API
	// Backend returns what runs node n's pods: podsync/podsynctest's
	// simulated backend, with PodIP for the pods' addresses. Its Backend
	// may have no Runnables (nothing runs a hollow node's loops but the
	// fleet). Required.
	Backend func(n fleet.PodNode, podIP func(*corev1.Pod) string) podsync.BackendFunc
	// Prober runs every node's probes. Default: every probe succeeds at
	// once (nothing listens on a hollow node's pod IPs).
	Prober probe.Prober
	// PodCIDR returns the range node n's pod IPs come from, used when its
	// Node has no spec.podCIDR. Default: 10.<i/256>.<i%256>.0/24 for node
	// index i (up to 65,536 nodes).
	PodCIDR func(n fleet.PodNode) netip.Prefix
	// WriteQPS and WriteBurst, when WriteQPS is set, are the budget of the
	// pods' writes (status patches, the final deletes, and their reads on
	// conflicts) that all nodes share: a write waits for its token in
	// turn, so nodes are served in the order they ask. Default 0: the
	// API client's own rate limit is the budget. WriteBurst defaults to
	// twice WriteQPS.
	WriteQPS   float32
	WriteBurst int
	// Engine and Status hold the pod workers' and the status writer's
	// other options, as PodHalfOptions' do. Engine.RelistPeriod defaults
	// to FleetRelistPeriod and Engine.ResyncPeriod to FleetResyncPeriod: a
	// simulated backend tells the engine of its changes when it syncs a pod
	// and asks for the pod's next sync at its next stage change
	// (podsynctest's does), and probe results and the API's changes make a
	// pod due, so a hollow node's relist and its pods' periodic syncs are a
	// safety net, not how changes are seen (the kubelet resyncs its pods
	// every minute: with 10,000 idle hollow pods on 1,000 nodes, about a
	// fifth of the fleet's CPU).
	Engine podsync.Options
	Status status.Options
	// Recorder receives every node's pod events. Default nil: none.
	Recorder record.EventRecorder
	// Clock drives every node's pods; the fleet's clock. Default the real
	// clock.
	Clock clock.WithTicker
	// OnNode, when set, is called with each node's pod half once it is
	// built (in Node); an error fails the node. heartbeat/fleet/fleetapi's
	// Server.Add is one: every node then serves kubelet's node API at an
	// address of its own. Default nil.
	OnNode func(n fleet.PodNode, half *PodHalf) error
	// Registerer receives the pod halves' metrics, one set shared by all
	// nodes (each metric counts every node's pods). Default nil: none
	// exported (the nodes still share one set, kept in a registry of
	// their own).
	Registerer prometheus.Registerer
}

// FleetPods runs API pods on a fleet's hollow nodes (heartbeat/fleet) with
// the pod half: each node gets a PodHalf stepped by the fleet's workers
// (PodHalf.SyncOnce, no goroutine of its own), and all of them share one
// watch of the pods bound to nodes (SharedPods) and one client, so one
// write budget. Give its Node method as fleet.Options.Pods and run it (the
// shared watch) beside the fleet.
type FleetPods struct {
	o      FleetPodsOptions
	shared *SharedPods
	writes func(ns string) PodClient // API.Pods behind the write budget

	mu    sync.Mutex
	halfs map[string]*PodHalf
}

// NewFleetPods checks o; it makes no request.
func NewFleetPods(o FleetPodsOptions) (*FleetPods, error) {
	switch {
	case o.API == nil || o.API.Pods == nil:
		return nil, optcheck.Required("nodekit: FleetPodsOptions.API.Pods")
	case o.Backend == nil:
		return nil, optcheck.Required("nodekit: FleetPodsOptions.Backend")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Prober == nil {
		o.Prober = probe.ProberFunc(func(context.Context, *corev1.Probe, probe.Target) probe.Outcome {
			return probe.Outcome{Result: probe.Success}
		})
	}
	if o.PodCIDR == nil {
		o.PodCIDR = defaultPodCIDR
	}
	if o.Engine.RelistPeriod == 0 {
		o.Engine.RelistPeriod = FleetRelistPeriod
	}
	if o.Engine.ResyncPeriod == 0 {
		o.Engine.ResyncPeriod = FleetResyncPeriod
	}
	if o.Registerer == nil {
		// The nodes' metrics are made once, not once a node.
		o.Registerer = prometheus.NewRegistry()
	}
	if o.WriteQPS < 0 || o.WriteBurst < 0 {
		return nil, fmt.Errorf("nodekit: FleetPodsOptions.WriteQPS %v and WriteBurst %d must not be negative", o.WriteQPS, o.WriteBurst)
	}
	p := &FleetPods{o: o, halfs: map[string]*PodHalf{}, writes: o.API.Pods}
	if o.WriteQPS > 0 {
		if o.WriteBurst == 0 {
			o.WriteBurst = max(1, int(2*o.WriteQPS))
		}
		// Wall time: the budget is the API server's, whatever the clock.
		limiter := flowcontrol.NewTokenBucketRateLimiter(o.WriteQPS, o.WriteBurst)
		pods := o.API.Pods
		p.writes = func(ns string) PodClient { return budgetedPods{PodClient: pods(ns), limiter: limiter} }
	}
	// Only the pods of this fleet's nodes (a shard's) are kept.
	shared, err := NewSharedPods(SharedPodsOptions{Pods: o.API.Pods(corev1.NamespaceAll), Clock: o.Clock,
		Nodes: func(name string) bool { return p.PodHalf(name) != nil }})
	if err != nil {
		return nil, err
	}
	p.shared = shared
	return p, nil
}

func defaultPodCIDR(n fleet.PodNode) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n.Index >> 8), byte(n.Index), 0}), 24)
}

// Run runs the shared watch until ctx ends.
func (p *FleetPods) Run(ctx context.Context) error { return p.shared.Run(ctx) }

// Shared returns the shared watch.
func (p *FleetPods) Shared() *SharedPods { return p.shared }

// PodHalf returns node's pod half, nil for a node Node was not called for.
func (p *FleetPods) PodHalf(node string) *PodHalf {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.halfs[node]
}

// Node builds node n's pod half: fleet.Options.Pods.
func (p *FleetPods) Node(n fleet.PodNode) (fleet.PodStep, error) {
	if n.Node == nil || n.Trigger == nil {
		return nil, errors.New("nodekit: FleetPods.Node: the PodNode has no Node or Trigger")
	}
	ips := &podIPs{node: n, cidr: p.o.PodCIDR}
	api := &API{Pods: p.writes}
	half, err := NewPodHalf(PodHalfOptions{
		NodeName:   n.Name,
		API:        api,
		SharedPods: p.shared,
		Backend:    p.o.Backend(n, ips.podIP),
		Node:       fleetNode{n},
		HostIPs:    []string{ips.hostIP()},
		Prober:     p.o.Prober,
		Engine:     p.o.Engine,
		Status:     p.o.Status,
		Clock:      p.o.Clock,
		Registerer: p.o.Registerer,
		Recorder:   p.o.Recorder,
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: fleet node %q: %w", n.Name, err)
	}
	if err := half.steppable(); err != nil {
		return nil, fmt.Errorf("nodekit: fleet node %q: %w", n.Name, err)
	}
	if p.o.OnNode != nil {
		if err := p.o.OnNode(n, half); err != nil {
			return nil, fmt.Errorf("nodekit: fleet node %q: %w", n.Name, err)
		}
	}
	p.shared.OnChange(n.Name, n.Trigger)
	p.mu.Lock()
	p.halfs[n.Name] = half
	p.mu.Unlock()
	return half, nil
}

// fleetNode is a fleet node's Node as a podsync.NodeSource that tells
// whether it is registered.
type fleetNode struct{ n fleet.PodNode }

func (f fleetNode) Node() *corev1.Node { return f.n.Node() }
func (f fleetNode) Registered() bool {
	if f.n.Registered != nil {
		return f.n.Registered()
	}
	return f.n.Node() != nil
}

// podIPs hands out a node's pod IPs from its Node's spec.podCIDR (or the
// default range) in turn, skipping the range's first address (the host's).
type podIPs struct {
	node fleet.PodNode
	cidr func(fleet.PodNode) netip.Prefix

	mu  sync.Mutex
	seq uint32
}

func (ip *podIPs) prefix() netip.Prefix {
	if node := ip.node.Node(); node != nil && node.Spec.PodCIDR != "" {
		if pfx, err := netip.ParsePrefix(node.Spec.PodCIDR); err == nil && pfx.Addr().Is4() {
			return pfx.Masked()
		}
	}
	return ip.cidr(ip.node).Masked()
}

func (ip *podIPs) hostIP() string {
	return ip.prefix().Addr().Next().String()
}

func (ip *podIPs) podIP(*corev1.Pod) string {
	pfx := ip.prefix()
	size := uint32(1) << (32 - pfx.Bits())
	ip.mu.Lock()
	ip.seq++
	// Addresses 2 .. size-2 in turn: not the network, the host or the
	// broadcast address.
	off := 2 + (ip.seq-1)%max(size-3, 1)
	ip.mu.Unlock()
	b := pfx.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += off
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// budgetedPods takes a token of the shared budget before each request the
// status writer makes.
type budgetedPods struct {
	PodClient
	limiter flowcontrol.RateLimiter
}

func (b budgetedPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	if err := b.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	return b.PodClient.Get(ctx, name, opts)
}

func (b budgetedPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	if err := b.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	return b.PodClient.Patch(ctx, name, pt, data, opts, sub...)
}

func (b budgetedPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if err := b.limiter.Wait(ctx); err != nil {
		return err
	}
	return b.PodClient.Delete(ctx, name, opts)
}
