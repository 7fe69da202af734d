package fleet

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/timerheap"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

// Defaults and bounds of Options.
const (
	DefaultNamePrefix = "node-"
	DefaultWorkers    = 16
	// DefaultGranularity is the default tick of a fleet's schedule: with
	// 1,000 nodes on a real API server, 1s ticks take a third of the CPU
	// that unrounded slots (one request every 10ms) do.
	DefaultGranularity = time.Second
	MaxWorkers         = 4096
	MaxNodes           = 1 << 24
	// FleetLabel is set to "true" on every Node DefaultTemplate makes, so
	// that a fleet's nodes can be listed and cleaned up.
	FleetLabel = "heartbeattest.nodekit.io/fleet"

	// maxSyncReruns bounds how often one SyncOnce runs a step that keeps
	// falling due again at once (under a fake clock, a step asking for no
	// wait without end).
	maxSyncReruns = 1000
)

// Options configure a Fleet. Zero values take the default named in each
// field's comment.
type Options struct {
	// Nodes is the client of the Nodes every node registers and writes: a
	// fake clientset's CoreV1().Nodes() (heartbeattest.UIDClientset makes
	// its objects get UIDs) or a real API server's. Required.
	Nodes NodeClient
	// Leases is the client of the leases (in kube-node-lease) every node
	// renews: a clientset's CoordinationV1().Leases(lease.DefaultNamespace),
	// heartbeattest.TrackerLeases (a fake clientset's fast path) or
	// LeanLeases. The fleet's injected lease faults apply in front of it.
	// Required.
	Leases LeaseClient
	// Count is the number of nodes, between 1 and 16,777,216. Required.
	Count int
	// NamePrefix names the nodes: node i is NamePrefix followed by i in
	// decimal. Default "node-".
	NamePrefix string
	// Template returns the Node that node i registers: labels, annotations,
	// taints, spec, addresses, and capacity. In the template's
	// status.capacity, cpu, memory, pods and ephemeral-storage become node
	// i's host facts (CPUs, MemoryTotal, NodeFS capacity) and maximum pods,
	// so the default status setters report them; other resources (extended
	// resources) are registered as given and left alone. status.addresses,
	// when set, become the node's InternalIP, ExternalIP and Hostname.
	// Called again when a node is recreated. Default: DefaultTemplate.
	Template func(i int, name string) *corev1.Node
	// Facts returns node i's host facts, served by a nodestatustest.Host that
	// Node.Host returns. Default: nodestatustest.Facts(name).
	Facts func(i int, name string) nodestatus.HostFacts
	// Runtime is what the status setters of every node read for the runtime's
	// version, readiness and images. Shared by all nodes. Default:
	// nodestatustest.NewRuntime() (ready, no images).
	Runtime nodestatus.RuntimeInfo
	// StatusOptions, when set, adjusts node i's nodestatus.Options before its
	// default setters are built (Host, Runtime, Clock, MaxPods and NodeIPs
	// are filled in). Default: none.
	StatusOptions func(i int, o *nodestatus.Options)
	// Setters, when set, edits node i's setter list (for example to add a
	// setter of one's own). Default: nodestatus.DefaultSetters unchanged.
	Setters func(i int, s nodestatus.Setters) nodestatus.Setters
	// Heartbeat, when set, adjusts node i's heartbeat.Options after the fleet
	// filled them in (Nodes, NodeName, Node, StatusSetter, Clock,
	// LeaseOptions, frequencies, ReRegister true). The steps are the
	// heartbeat's own (heartbeat.Heartbeat.SyncOnce: registration back-off,
	// fast start-up checks, re-registration follow these options); the
	// fleet only moves each node's regular rounds onto its slot. Called
	// again when a node is recreated. Default: none.
	Heartbeat func(i int, o *heartbeat.Options)
	// Lease, when set, adjusts node i's lease.Options (the heartbeat's
	// LeaseOptions) before Heartbeat is called. Called again when a node is
	// recreated. Default: none.
	Lease func(i int, o *lease.Options)
	// Strategy is every node's heartbeat strategy. Default:
	// heartbeat.LeaseStrategy().
	Strategy heartbeat.HeartbeatStrategy
	// LeaseDuration is written to each lease, a whole number of seconds
	// between 1s and 1h. Default: 40s.
	LeaseDuration time.Duration
	// RenewInterval is the period of each node's lease renewals, between
	// 100ms and LeaseDuration. Renewals of the fleet are spread evenly over
	// it, each node keeping its own slot. Default: LeaseDuration/4 (10s).
	RenewInterval time.Duration
	// StatusUpdateFrequency is the period of each node's status rounds,
	// between 100ms and 1h, spread evenly as renewals are. Default: 10s.
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency is how often an unchanged status is posted with
	// the Lease strategy, between 100ms and 24h. Default: 5m.
	StatusReportFrequency time.Duration
	// Granularity is the tick of the fleet's schedule: each node's slot in
	// the renew interval and in the status period is rounded up to a
	// multiple of it, so the steps of the nodes sharing a tick run as one
	// batch. Coarser ticks cost less CPU per step (fewer wake-ups, requests
	// in flight together); finer ticks spread the load on the API server
	// more evenly. Between 0 and the shorter of RenewInterval and
	// StatusUpdateFrequency; 1ns spreads slots without rounding.
	// Default: DefaultGranularity, or the shorter period when that is
	// shorter.
	Granularity time.Duration
	// Workers bounds the steps that run at once, between 1 and 4096.
	// Default: 16.
	Workers int
	// Seed makes the random choices of the heartbeats (the spreading of
	// periodic status reports) repeatable. Default 0 (still repeatable).
	Seed uint64
	// Clock is the source of time of every node. With a
	// k8s.io/utils/clock/testing FakeClock the fleet is deterministic and
	// Step drives it. Default: clock.RealClock{}.
	Clock clock.Clock
	// Registerer registers the heartbeat and lease metrics, shared by all
	// nodes. Nil: no metrics.
	Registerer prometheus.Registerer
	// Shard, when its Count is more than 1, keeps only this process's share
	// of the Count nodes: those whose name's stable hash (FNV-1a) modulo
	// Shard.Count is Shard.Index, so that Shard.Count fleet processes with
	// the same Count and NamePrefix share one cluster without overlap.
	// Node i of Template, Facts, Heartbeat, Lease and PodNode.Index stays
	// the number in the node's name; Fleet.Node and Node.Index count this
	// shard's nodes only. Default: no sharding.
	Shard Shard
	// Pods, when set, gives each node pods to run: it is called once per
	// node in New, and the PodStep it returns is run by the fleet's
	// workers whenever it asked to be (its SyncOnce's wait) or its
	// PodNode.Trigger was called, as the node's third step beside its
	// lease renewals and status rounds. nodekit.FleetPods builds them from
	// nodekit's pod half. Default nil: the nodes run no pods.
	Pods func(PodNode) (PodStep, error)
}

// Shard is one of Count shares of a fleet's nodes (Options.Shard).
type Shard struct{ Index, Count int }

// ParseShard parses "i/n" (0 <= i < n).
func ParseShard(s string) (Shard, error) {
	var sh Shard
	i, n, ok := strings.Cut(s, "/")
	var err1, err2 error
	if ok {
		sh.Index, err1 = strconv.Atoi(i)
		sh.Count, err2 = strconv.Atoi(n)
	}
	if !ok || err1 != nil || err2 != nil || sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count {
		return Shard{}, fmt.Errorf("fleet: shard %q: want i/n with 0 <= i < n", s)
	}
	return sh, nil
}

// Has reports whether the node named name is in the shard.
func (s Shard) Has(name string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()%uint64(s.Count) == uint64(s.Index)
}

// PodNode is what a node's pods get from their fleet.
type PodNode struct {
	// Index and Name are the node's.
	Index int
	Name  string
	// Node returns the Node as the node's heartbeat last read or wrote it
	// (nil before registration): what pods are admitted against. It is
	// decoded once per change and shared (heartbeat.NodeView.Shared): do
	// not modify it.
	Node func() *corev1.Node
	// Registered reports whether the Node is known to exist, without
	// decoding it (Node decodes a copy on every call).
	Registered func() bool
	// Trigger makes the node's pod step due now (it runs on the fleet's
	// next SyncOnce, or at once under Run).
	Trigger func()
}

// PodStep is a node's pods as the fleet drives them: SyncOnce does what is
// due and returns how long to wait before it is due again (negative: not
// until PodNode.Trigger). *nodekit.PodHalf is one.
type PodStep interface {
	SyncOnce(ctx context.Context) (time.Duration, error)
}

// DefaultTemplate is the node template used when Options.Template is nil:
// the kubelet's default labels for a linux/amd64 node named name, and
// FleetLabel.
func DefaultTemplate(i int, name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		FleetLabel:             "true",
	}}}
}

// Fleet is a set of fake nodes, each registering its Node and keeping it alive
// with nodekit's heartbeat and lease code. One scheduler (a timer heap on the
// injected clock) hands each node's lease renewals and status rounds, as
// the renewer's and the heartbeat's own SyncOnce steps, to a bounded pool of workers: no
// goroutine is kept per node.
type Fleet struct {
	nodeClient   NodeClient
	leaseClient  LeaseClient
	opts         Options
	clock        clock.Clock
	wall         clock.WithTicker
	epoch        int64
	leasePeriod  int64
	statusPeriod int64
	gran         int64
	workers      int
	nodes        []Node
	byName       map[string]int32

	syncMu sync.Mutex // serialises SyncOnce

	mu       sync.Mutex
	cond     *sync.Cond // on mu: inflight or a node's running bits changed
	heap     timerheap.Heap[taskKey]
	inflight int
	wake     int64 // when Run wakes next; MaxInt64: not sleeping
	running  bool
	kick     chan struct{}
	// syncWake is when a SyncOnce waiting for its running steps wakes next
	// (MinInt64: none waits), and syncKick wakes it for a step due sooner.
	syncWake int64
	syncKick chan struct{}
	// syncStart is when the current SyncOnce started; reruns counts the
	// tasks it made due again at once, by task.
	syncStart int64
	reruns    map[taskKey]int

	nmu    sync.Mutex
	notify chan struct{} // closed when steps completed; nil: nobody waits

	renewals, leaseErrors, statusRounds, statusErrors, registrations, registerErrors atomic.Uint64
	podSteps, podErrors                                                              atomic.Uint64
}

// New checks opts and builds the fleet's nodes. It makes no request: Run or
// SyncOnce (Step under a fake clock) does the work. Each node registers at
// the clock's time of New, and writes its lease first at its own slot within
// the first renew interval (so one Step of the renew interval after the
// first SyncOnce creates every lease).
func New(opts Options) (*Fleet, error) {
	if opts.Nodes == nil {
		return nil, optcheck.Required("fleet: Options.Nodes")
	}
	if opts.Leases == nil {
		return nil, optcheck.Required("fleet: Options.Leases")
	}
	if err := optcheck.Range("fleet: Options.Count", opts.Count, 1, MaxNodes); err != nil {
		return nil, err
	}
	if opts.NamePrefix == "" {
		opts.NamePrefix = DefaultNamePrefix
	}
	if opts.Template == nil {
		opts.Template = DefaultTemplate
	}
	if opts.Facts == nil {
		opts.Facts = func(_ int, name string) nodestatus.HostFacts { return nodestatustest.Facts(name) }
	}
	if opts.Runtime == nil {
		opts.Runtime = nodestatustest.NewRuntime()
	}
	if opts.Strategy == nil {
		opts.Strategy = heartbeat.LeaseStrategy()
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = lease.DefaultLeaseDuration
	}
	if err := optcheck.Range("fleet: Options.LeaseDuration", opts.LeaseDuration, lease.MinLeaseDuration, lease.MaxLeaseDuration); err != nil {
		return nil, err
	}
	if opts.LeaseDuration%time.Second != 0 {
		return nil, fmt.Errorf("fleet: Options.LeaseDuration %v must be a whole number of seconds", opts.LeaseDuration)
	}
	if opts.RenewInterval == 0 {
		opts.RenewInterval = opts.LeaseDuration / 4
	}
	if err := optcheck.Range("fleet: Options.RenewInterval", opts.RenewInterval, lease.MinRenewInterval, opts.LeaseDuration); err != nil {
		return nil, err
	}
	if opts.StatusUpdateFrequency == 0 {
		opts.StatusUpdateFrequency = heartbeat.DefaultNodeStatusUpdateFrequency
	}
	if err := optcheck.Range("fleet: Options.StatusUpdateFrequency", opts.StatusUpdateFrequency, 100*time.Millisecond, time.Hour); err != nil {
		return nil, err
	}
	if opts.StatusReportFrequency == 0 {
		opts.StatusReportFrequency = heartbeat.DefaultNodeStatusReportFrequency
	}
	if err := optcheck.Range("fleet: Options.StatusReportFrequency", opts.StatusReportFrequency, 100*time.Millisecond, 24*time.Hour); err != nil {
		return nil, err
	}
	if opts.Granularity == 0 {
		opts.Granularity = min(DefaultGranularity, opts.RenewInterval, opts.StatusUpdateFrequency)
	}
	if err := optcheck.Range("fleet: Options.Granularity", opts.Granularity, 0, min(opts.RenewInterval, opts.StatusUpdateFrequency)); err != nil {
		return nil, err
	}
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers
	}
	if err := optcheck.Range("fleet: Options.Workers", opts.Workers, 1, MaxWorkers); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if sh := opts.Shard; sh.Count != 0 && (sh.Count < 0 || sh.Index < 0 || sh.Index >= sh.Count) {
		return nil, fmt.Errorf("fleet: Options.Shard %d/%d: want 0 <= Index < Count", sh.Index, sh.Count)
	}
	var members []int // the node numbers of this shard
	for i := range opts.Count {
		if opts.Shard.Has(opts.NamePrefix + strconv.Itoa(i)) {
			members = append(members, i)
		}
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("fleet: shard %d/%d of %d nodes has none", opts.Shard.Index, opts.Shard.Count, opts.Count)
	}
	f := &Fleet{
		nodeClient:   opts.Nodes,
		leaseClient:  opts.Leases,
		opts:         opts,
		clock:        opts.Clock,
		wall:         clock.RealClock{},
		epoch:        opts.Clock.Now().UnixNano(),
		leasePeriod:  int64(opts.RenewInterval),
		statusPeriod: int64(opts.StatusUpdateFrequency),
		gran:         int64(opts.Granularity),
		workers:      opts.Workers,
		nodes:        make([]Node, len(members)),
		byName:       make(map[string]int32, len(members)),
		wake:         math.MaxInt64,
		kick:         make(chan struct{}, 1),
		syncWake:     math.MinInt64,
		syncKick:     make(chan struct{}, 1),
	}
	f.cond = sync.NewCond(&f.mu)
	for i, num := range members {
		if err := f.initNode(i, num); err != nil {
			return nil, err
		}
	}
	// Every node registers at once, and writes its lease first at its slot
	// in the first renew interval, so that registrations come first and
	// lease writes are spread from the start.
	for i := range f.nodes {
		n := &f.nodes[i]
		n.flags |= queued(kindStatus)
		f.push(task{due: f.epoch, node: int32(i), kind: kindStatus})
		if n.pods != nil {
			n.flags |= queued(kindPods)
			f.push(task{due: f.epoch, node: int32(i), kind: kindPods})
		} else {
			n.flags |= stopped(kindPods)
		}
		if !f.opts.Strategy.UsesLease() {
			n.flags |= stopped(kindLease) // no lease to renew
			continue
		}
		n.flags |= queued(kindLease)
		f.push(task{due: f.epoch + slot(i, 0, f.leasePeriod, f.gran), node: int32(i), kind: kindLease})
	}
	return f, nil
}

// initNode builds slot i of the fleet, the node numbered num.
func (f *Fleet) initNode(i, num int) error {
	n := &f.nodes[i]
	n.f = f
	n.idx = int32(i)
	n.num = int32(num)
	n.name = f.opts.NamePrefix + strconv.Itoa(num)
	n.rnd = f.opts.Seed ^ (uint64(num)+1)*0x9E3779B97F4A7C15
	if _, dup := f.byName[n.name]; dup {
		return fmt.Errorf("fleet: two nodes named %q", n.name)
	}
	f.byName[n.name] = int32(i)
	n.nodes = nodeClient{NodeClient: f.nodeClient, n: n}
	n.leases = leaseClient{LeaseClient: f.leaseClient, n: n}

	tmpl := f.opts.Template(num, n.name)
	facts := f.opts.Facts(num, n.name)
	so := nodestatus.Options{Runtime: f.opts.Runtime, Clock: f.clock}
	applyTemplate(tmpl, &facts, &so)
	n.host = nodestatustest.NewHost(facts)
	so.Host = n.host
	if f.opts.StatusOptions != nil {
		f.opts.StatusOptions(num, &so)
	}
	setters, err := nodestatus.DefaultSetters(so)
	if err != nil {
		return fmt.Errorf("fleet: node %q: %w", n.name, err)
	}
	if f.opts.Setters != nil {
		setters = f.opts.Setters(num, setters)
	}
	n.setter = setters

	hb, err := f.newHeartbeat(n, tmpl)
	if err != nil {
		return err
	}
	n.hb.Store(hb)
	if f.opts.Pods != nil {
		pn := PodNode{Index: num, Name: n.name, Node: func() *corev1.Node { return n.hb.Load().View().Shared() },
			Registered: func() bool { return n.hb.Load().View().Registered() }, Trigger: n.TriggerPods}
		if n.pods, err = f.opts.Pods(pn); err != nil {
			return fmt.Errorf("fleet: node %q: pods: %w", n.name, err)
		}
		if n.pods == nil {
			return fmt.Errorf("fleet: node %q: Options.Pods returned no PodStep", n.name)
		}
	}
	return nil
}

func (f *Fleet) newHeartbeat(n *Node, tmpl *corev1.Node) (*heartbeat.Heartbeat, error) {
	ho := heartbeat.Options{
		Nodes:                     n.nodes,
		Leases:                    n.leases,
		NodeName:                  n.name,
		Node:                      tmpl,
		StatusSetter:              (*nodeSetter)(n),
		Strategy:                  f.opts.Strategy,
		NodeStatusUpdateFrequency: f.opts.StatusUpdateFrequency,
		NodeStatusReportFrequency: f.opts.StatusReportFrequency,
		Jitter:                    -1, // the fleet spreads rounds itself
		Clock:                     f.clock,
		Registerer:                f.opts.Registerer,
		Rand:                      n.rand,
		// A fleet's node deleted by a test comes back, as hollow nodes
		// should; kubelet's default is to register once.
		ReRegister: true,
	}
	if f.opts.Strategy.UsesLease() {
		ho.LeaseOptions = lease.Options{
			Leases:        n.leases,
			Nodes:         n.nodes,
			NodeName:      n.name,
			LeaseDuration: f.opts.LeaseDuration,
			RenewInterval: f.opts.RenewInterval,
			Jitter:        -1, // the fleet spreads renewals itself
			Clock:         f.clock,
			Registerer:    f.opts.Registerer,
			// Not the node's Rand, which only the status steps may call.
			Rand: rand.Float64,
		}
		if f.opts.Lease != nil {
			f.opts.Lease(int(n.num), &ho.LeaseOptions)
		}
	}
	if f.opts.Heartbeat != nil {
		f.opts.Heartbeat(int(n.num), &ho)
	}
	hb, err := heartbeat.New(ho)
	if err != nil {
		return nil, fmt.Errorf("fleet: node %q: %w", n.name, err)
	}
	if (hb.Renewer() != nil) != f.opts.Strategy.UsesLease() {
		return nil, fmt.Errorf("fleet: node %q: Options.Heartbeat must keep Options.Strategy's use of a lease", n.name)
	}
	return hb, nil
}

// applyTemplate turns the template's capacity and addresses into host facts
// and status options, so that the default setters report them.
func applyTemplate(tmpl *corev1.Node, facts *nodestatus.HostFacts, so *nodestatus.Options) {
	if q, ok := tmpl.Status.Capacity[corev1.ResourceCPU]; ok {
		facts.CPUs = int((q.MilliValue() + 999) / 1000)
	}
	if q, ok := tmpl.Status.Capacity[corev1.ResourceMemory]; ok {
		total := uint64(q.Value())
		facts.MemoryAvailable = facts.MemoryAvailable * total / max(facts.MemoryTotal, 1)
		facts.MemoryTotal = total
	}
	if q, ok := tmpl.Status.Capacity[corev1.ResourcePods]; ok {
		so.MaxPods = int(q.Value())
	}
	if q, ok := tmpl.Status.Capacity[corev1.ResourceEphemeralStorage]; ok {
		c := uint64(q.Value())
		facts.NodeFS.Available = facts.NodeFS.Available * c / max(facts.NodeFS.Capacity, 1)
		facts.NodeFS.Capacity = c
	}
	for _, a := range tmpl.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			if ip := parseIP(a.Address); ip != nil {
				so.NodeIPs = append(so.NodeIPs, ip)
			}
		case corev1.NodeExternalIP:
			if ip := parseIP(a.Address); ip != nil {
				so.ExternalIPs = append(so.ExternalIPs, ip)
			}
		case corev1.NodeHostName:
			so.Hostname = a.Address
		}
	}
}

// Capacity returns a resource list for a template's status.capacity.
func Capacity(cpu, memory string, pods int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
}

// Len returns the number of nodes.
func (f *Fleet) Len() int { return len(f.nodes) }

// Node returns node i, for 0 <= i < Len().
func (f *Fleet) Node(i int) *Node { return &f.nodes[i] }

// NodeByName returns the node called name, or nil.
func (f *Fleet) NodeByName(name string) *Node {
	i, ok := f.byName[name]
	if !ok {
		return nil
	}
	return &f.nodes[i]
}

// Clock returns the fleet's clock.
func (f *Fleet) Clock() clock.Clock { return f.clock }

// NodeClient returns the fleet's client of Nodes (without any node's
// injected faults).
func (f *Fleet) NodeClient() NodeClient { return f.nodeClient }

// LeaseClient returns the fleet's client of leases (without any node's
// injected faults).
func (f *Fleet) LeaseClient() LeaseClient { return f.leaseClient }

// ---- scheduling ----

func queued(k kind) uint16  { return 1 << (0*nKinds + k) }
func running(k kind) uint16 { return 1 << (1*nKinds + k) }
func stopped(k kind) uint16 { return 1 << (2*nKinds + k) }
func rerun(k kind) uint16   { return 1 << (3*nKinds + k) }

const flagDeleted uint16 = 1 << (4 * nKinds)

// never is the due time of a step that asked for no wake-up: it is not
// put back in the heap, only scheduled again by a trigger.
const never = math.MaxInt64

// push puts t in the timer heap (internal/timerheap); under f.mu.
func (f *Fleet) push(t task) {
	f.heap.Set(taskKey{t.node, t.kind}, time.Unix(0, t.due))
}

// scheduleLocked queues n's task of kind k at due, or moves it earlier.
func (f *Fleet) scheduleLocked(n *Node, k kind, due int64) {
	if n.flags&(stopped(k)|flagDeleted) != 0 {
		return
	}
	switch {
	case n.flags&running(k) != 0:
		if due <= f.clock.Now().UnixNano() {
			n.flags |= rerun(k)
		}
		return
	case n.flags&queued(k) != 0:
		key := taskKey{n.idx, k}
		if at, ok := f.heap.Due(key); ok && due < at.UnixNano() {
			f.heap.Set(key, time.Unix(0, due))
		}
	default:
		n.flags |= queued(k)
		f.push(task{due: due, node: n.idx, kind: k})
	}
	f.kickLocked(due)
}

func (f *Fleet) kickLocked(due int64) {
	if due < f.wake {
		f.wake = due
		notify(f.kick)
	}
	if due < f.syncWake {
		f.syncWake = due
		notify(f.syncKick)
	}
}

// notify puts a token in ch (of capacity 1) unless one is there.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// popDueLocked moves the tasks due at now into batch and marks them running.
func (f *Fleet) popDueLocked(now int64, batch []task, limit int) []task {
	for len(batch) < limit {
		key, at, ok := f.heap.Peek()
		if !ok || at.UnixNano() > now {
			break
		}
		f.heap.Remove(key)
		t := task{due: at.UnixNano(), node: key.node, kind: key.kind}
		n := &f.nodes[t.node]
		if n.flags&(stopped(t.kind)|flagDeleted) != 0 {
			n.flags &^= queued(t.kind)
			continue
		}
		n.flags |= running(t.kind)
		f.inflight++
		batch = append(batch, t)
	}
	return batch
}

// complete reschedules a finished task at next.
func (f *Fleet) complete(t task, next int64) {
	f.mu.Lock()
	n := &f.nodes[t.node]
	k := t.kind
	n.flags &^= running(k)
	switch {
	case n.flags&(stopped(k)|flagDeleted) != 0:
		n.flags &^= queued(k) | rerun(k)
	default:
		if n.flags&rerun(k) != 0 {
			n.flags &^= rerun(k)
			next = min(next, f.clock.Now().UnixNano())
		}
		if next == never {
			n.flags &^= queued(k)
			break
		}
		if next <= f.syncStart {
			if f.reruns == nil {
				f.reruns = map[taskKey]int{}
			}
			f.reruns[taskKey{t.node, k}]++
		}
		f.push(task{due: next, node: t.node, kind: k})
		f.kickLocked(next)
	}
	f.inflight--
	if f.inflight == 0 || n.waiters > 0 {
		f.cond.Broadcast()
	}
	f.mu.Unlock()
}

// exec runs one task and reschedules it.
func (f *Fleet) exec(ctx context.Context, t task) {
	n := &f.nodes[t.node]
	var next int64
	switch t.kind {
	case kindLease:
		next = f.execLease(ctx, n)
	case kindStatus:
		next = f.execStatus(ctx, n, t.due)
	default:
		next = f.execPods(ctx, n)
	}
	f.complete(t, next)
	f.signal()
}

func (f *Fleet) execLease(ctx context.Context, n *Node) int64 {
	start := f.clock.Now()
	wait, err := n.hb.Load().Renewer().SyncOnce(ctx)
	now := f.clock.Now().UnixNano()
	if err != nil {
		if ctx.Err() == nil {
			f.leaseErrors.Add(1)
			n.leaseErrors.Add(1)
			n.setLastErr(kindLease, err)
		}
		return now + int64(wait)
	}
	n.lastRenew.Store(start.UnixNano())
	n.renewals.Add(1)
	f.renewals.Add(1)
	return nextSlot(now, f.epoch, slot(int(n.idx), 0, f.leasePeriod, f.gran), f.leasePeriod)
}

// execStatus runs the node's heartbeat step (heartbeat.Heartbeat.SyncOnce).
// The heartbeat decides what is due (registration and its back-off, fast
// start-up checks, re-registration); the fleet only puts each node's
// regular round on the node's slot: a step due on the slot grid is made a
// full round (Trigger), and a wait that reaches past the next slot is cut to
// it.
func (f *Fleet) execStatus(ctx context.Context, n *Node, due int64) int64 {
	hb := n.hb.Load()
	logger := klog.FromContext(ctx)
	ph := slot(int(n.idx), 1<<63, f.statusPeriod, f.gran)
	wasRegistered := hb.Registered()
	if wasRegistered && (due-f.epoch-ph)%f.statusPeriod == 0 {
		hb.Trigger()
	}
	wait, err := hb.SyncOnce(ctx)
	f.statusRounds.Add(1)
	now := f.clock.Now().UnixNano()
	if err != nil && ctx.Err() == nil {
		f.statusErrors.Add(1)
		n.statusErrors.Add(1)
		n.setLastErr(kindStatus, err)
		logger.V(5).Info("Status step failed", "node", n.name, "err", err)
	}
	registered := hb.Registered()
	n.registered.Store(registered)
	switch {
	case registered && !wasRegistered:
		f.registrations.Add(1)
	case !registered && !wasRegistered && err != nil && ctx.Err() == nil:
		f.registerErrors.Add(1)
	}
	next := now + int64(wait)
	if registered {
		next = min(next, nextSlot(now, f.epoch, ph, f.statusPeriod))
	}
	return next
}

// execPods runs the node's pod step (Options.Pods) and returns when it
// asked to run next (never: not until a trigger).
func (f *Fleet) execPods(ctx context.Context, n *Node) int64 {
	wait, err := n.pods.SyncOnce(ctx)
	f.podSteps.Add(1)
	if err != nil && ctx.Err() == nil {
		f.podErrors.Add(1)
		n.setLastErr(kindPods, err)
		klog.FromContext(ctx).V(5).Info("Pod step failed", "node", n.name, "err", err)
	}
	if wait < 0 {
		return never
	}
	return f.clock.Now().UnixNano() + int64(wait)
}

// signal wakes the waiters of Wait* helpers.
func (f *Fleet) signal() {
	f.nmu.Lock()
	if f.notify != nil {
		close(f.notify)
		f.notify = nil
	}
	f.nmu.Unlock()
}

func (f *Fleet) changed() <-chan struct{} {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	if f.notify == nil {
		f.notify = make(chan struct{})
	}
	return f.notify
}

// SyncOnce runs every step that is due on the fleet's clock (renewals,
// status rounds, registrations, retries), and the steps that fall due
// meanwhile, on at most Options.Workers goroutines, and returns when none is
// due or running. Each step is handed to a free worker as soon as it is due,
// so a slow step (a request that times out) holds up only its own worker.
// Under a fake clock, each call after the clock moved does exactly the work
// that the moment asks for: it is the fleet's synchronous step, and Run is a
// loop over it. It returns ctx's error once the steps it started have
// finished, or an error when a step keeps falling due again at once without
// end.
func (f *Fleet) SyncOnce(ctx context.Context) error {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	f.mu.Lock()
	f.syncStart = f.clock.Now().UnixNano()
	clear(f.reruns)
	f.mu.Unlock()

	tasks := make(chan task)
	finished := make(chan struct{}, 1) // a step finished
	var wg sync.WaitGroup
	started := 0
	work := func(t task) {
		defer wg.Done()
		for ok := true; ok; t, ok = <-tasks {
			f.exec(ctx, t)
			notify(finished)
		}
	}
	defer func() {
		f.mu.Lock()
		f.syncWake = math.MinInt64
		f.mu.Unlock()
		close(tasks)
		wg.Wait()
	}()
	var one []task
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.mu.Lock()
		now := f.clock.Now().UnixNano()
		one = f.popDueLocked(now, one[:0], 1)
		if len(one) == 1 && f.reruns[taskKey{one[0].node, one[0].kind}] >= maxSyncReruns {
			f.mu.Unlock()
			// Put it back: it runs on the next call.
			f.complete(one[0], one[0].due)
			return fmt.Errorf("fleet: the %v step of %q still falling due after %d runs", one[0].kind, f.nodes[one[0].node].name, maxSyncReruns)
		}
		idle := len(one) == 0 && f.inflight == 0
		wait := loop.Never
		f.syncWake = math.MinInt64
		if len(one) == 0 && !idle {
			f.syncWake = math.MaxInt64
			if _, at, ok := f.heap.Peek(); ok {
				f.syncWake = at.UnixNano()
				wait = max(time.Duration(f.syncWake-now), 0)
			}
		}
		f.mu.Unlock()
		switch {
		case idle:
			return nil
		case len(one) == 0:
			// Steps are running and none is due: wait for one to finish (it
			// may have made another due), for the next to fall due, or for
			// a node's Trigger.
			if !loop.Wait(ctx, f.clock, time.Unix(0, now), wait, loop.Signal(f.syncKick), loop.Signal(finished)) {
				return ctx.Err()
			}
			continue
		}
		t := one[0]
		select {
		case tasks <- t: // to an idle worker
			continue
		default:
		}
		if started < f.workers {
			started++
			wg.Add(1)
			go work(t)
			continue
		}
		select {
		case tasks <- t:
		case <-ctx.Done():
			f.complete(t, t.due)
			return ctx.Err()
		}
	}
}

// Step moves the fleet's clock, which must have a Step method (a
// k8s.io/utils/clock/testing FakeClock), forward by d, in moves of at most the
// shorter of the renew interval and the status update frequency, and after
// each move runs what fell due (SyncOnce). Stepping by the renew interval
// renews every running lease exactly once.
func (f *Fleet) Step(ctx context.Context, d time.Duration) error {
	st, ok := f.clock.(interface{ Step(time.Duration) })
	if !ok {
		return fmt.Errorf("fleet: Step needs a clock with a Step method, not %T", f.clock)
	}
	chunk := time.Duration(min(f.leasePeriod, f.statusPeriod))
	for d > 0 {
		s := min(d, chunk)
		st.Step(s)
		d -= s
		if err := f.SyncOnce(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Run drives the fleet until ctx ends: a loop over SyncOnce, waiting on
// the fleet's clock for the next step to fall due (or for a node's
// Trigger). It returns ctx's error once every step it started has finished.
// Only one Run may be active at a time; SyncOnce and Step may be called
// meanwhile (they take turns with Run's).
func (f *Fleet) Run(ctx context.Context) error {
	f.mu.Lock()
	if f.running {
		f.mu.Unlock()
		return errors.New("fleet: Run is already running")
	}
	f.running = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running = false
		f.wake = math.MaxInt64
		f.mu.Unlock()
	}()
	logger := klog.FromContext(ctx)
	err := loop.Run(ctx, f.clock, func(ctx context.Context) (time.Duration, error) {
		if err := f.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Fleet step failed, will retry")
		}
		return f.nextWait(), nil
	}, loop.Signal(f.kick))
	if err != nil {
		return err
	}
	return ctx.Err()
}

// nextWait is the wait until the next step falls due (loop.Never when none
// is scheduled); a step scheduled earlier from now on kicks Run awake.
func (f *Fleet) nextWait() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wake = math.MaxInt64
	_, at, ok := f.heap.Peek()
	if !ok {
		return loop.Never
	}
	f.wake = at.UnixNano()
	return max(time.Duration(f.wake-f.clock.Now().UnixNano()), 0)
}

// Stats are counters of a fleet since New.
type Stats struct {
	// Nodes is the number of nodes; Registered those whose Node was known
	// to exist after their last status step.
	Nodes, Registered int
	// Renewals and LeaseErrors count lease renewals that succeeded and
	// failed.
	Renewals, LeaseErrors uint64
	// StatusRounds counts status rounds (posted or not), StatusErrors failed
	// status rounds and fast checks.
	StatusRounds, StatusErrors uint64
	// Registrations and RegisterErrors count registrations.
	Registrations, RegisterErrors uint64
	// PodSteps and PodErrors count pod steps (Options.Pods) and those that
	// returned an error.
	PodSteps, PodErrors uint64
}

// Stats returns the fleet's counters.
func (f *Fleet) Stats() Stats {
	s := Stats{
		Nodes:          len(f.nodes),
		Renewals:       f.renewals.Load(),
		LeaseErrors:    f.leaseErrors.Load(),
		StatusRounds:   f.statusRounds.Load(),
		StatusErrors:   f.statusErrors.Load(),
		Registrations:  f.registrations.Load(),
		RegisterErrors: f.registerErrors.Load(),
		PodSteps:       f.podSteps.Load(),
		PodErrors:      f.podErrors.Load(),
	}
	for i := range f.nodes {
		if f.nodes[i].registered.Load() {
			s.Registered++
		}
	}
	return s
}

// Freshness reports, from the renewTimes the fleet last wrote, how many
// leases of running (not stopped, not deleted) nodes were renewed within
// maxAge of now, and the age of the oldest renewal among those nodes (a node
// that never renewed counts as not fresh, with an age since New).
func (f *Fleet) Freshness(maxAge time.Duration) (fresh, running int, oldest time.Duration) {
	now := f.clock.Now().UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.nodes {
		n := &f.nodes[i]
		if n.flags&(stopped(kindLease)|flagDeleted) != 0 {
			continue
		}
		running++
		t := n.lastRenew.Load()
		if t == 0 {
			t = f.epoch
		}
		age := time.Duration(now - t)
		if age <= maxAge && n.lastRenew.Load() != 0 {
			fresh++
		}
		oldest = max(oldest, age)
	}
	return fresh, running, oldest
}
