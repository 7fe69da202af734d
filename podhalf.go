package nodekit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/hostip"
	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/runtimeclass"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
)

// registrationPoll is how often mirror pods check whether the Node is
// registered before they start.
const registrationPoll = 100 * time.Millisecond

// mirrorFirstWait bounds how long a change of the static pods waits for the
// mirror pods' sync before the pod workers get it.
const mirrorFirstWait = time.Second

// PodHalfOptions configure NewPodHalf. The zero value of each field means
// its default.
type PodHalfOptions struct {
	// NodeName is the node's name. Required.
	NodeName string
	// API is the API server: the API source, mirror pods, pod status
	// writes and events (Client.API). Default nil: standalone (static pods
	// only, nothing written to an API server).
	API *API
	// Backend builds what runs the pods (podsync/cri's for a container
	// runtime, a virtual node's own, podsynctest's simulated pods) from the
	// parts built before it. Required.
	Backend podsync.BackendFunc

	// ManifestPath is a directory of static pod manifests (or one file),
	// as the kubelet's --pod-manifest-path. Default "": none.
	ManifestPath string
	// FileCheckFrequency is how often ManifestPath is read besides its
	// inotify events. Default podsource's (20s).
	FileCheckFrequency time.Duration
	// ManifestURL serves static pods, as the kubelet's --manifest-url.
	// Default "": none.
	ManifestURL string
	// ManifestURLHeader is sent with each request of ManifestURL.
	ManifestURLHeader http.Header
	// HTTPCheckFrequency is how often ManifestURL is read. Default
	// podsource's (20s).
	HTTPCheckFrequency time.Duration
	// Sources are more pod sources, merged with the others. Default none.
	Sources []podsource.PodSource
	// SharedPods, with API, is where the API's pods bound to the node are
	// taken from: one watch for many nodes (a fleet's), run by its owner,
	// instead of a watch of the pod half's own. Default nil: the pod half
	// watches its node's pods itself.
	SharedPods *SharedPods

	// Node is the Node as the node half publishes it. Default: a new
	// heartbeat.NodeView (View), which NewNodeHalf publishes into when
	// given this pod half.
	Node podsync.NodeSource
	// LocalNode is the Node pods are admitted against while Node has none
	// (before registration, or standalone). Default: pods wait for the
	// Node; see LocalNode for the kubelet's behaviour.
	LocalNode func() (*corev1.Node, error)
	// HostIPs are the node's addresses. Default: the default-route
	// address.
	HostIPs []string
	// Prober runs probes. Default: probe.NewHandlers without an Execer
	// (exec probes fail with a message naming the missing execer) unless
	// Execer is set.
	Prober probe.Prober
	// Execer runs exec probes (a runtime's ExecSync) when Prober is nil.
	Execer runtime.Execer
	// AllowedUnsafeSysctls are the sysctls pods may set besides the safe
	// ones, as the kubelet's --allowed-unsafe-sysctls (names, or prefixes
	// ending in "*"; admission.SysctlOptions). Default none.
	AllowedUnsafeSysctls []string
	// Engine holds the pod workers' other options (resync period,
	// parallelism, back-offs). Syncer, Relister, Writer, Probes, Updates,
	// Sources, HostIPs, Admit, Triggers, Clock, Registerer and Recorder
	// are set by NewPodHalf and must be left empty.
	Engine podsync.Options
	// Status holds the status writer's other options (PendingDelay). Pods,
	// Clock and Registerer are set by NewPodHalf.
	Status status.Options
	// Eviction holds the eviction manager's other options (thresholds,
	// grace periods) when the backend can be observed. NodeName, Observer,
	// ActivePods, Killer, PodCleanedUp, Reclaimers, Clock, Registerer and
	// Recorder are set by NewPodHalf.
	Eviction eviction.Options
	// Clock drives every loop. Default clock.RealClock{}.
	Clock clock.WithTicker
	// Registerer receives the parts' metrics. Default nil: none.
	Registerer prometheus.Registerer
	// Recorder receives the pods' events. Default: with API.Events, an
	// EventRecorder sending them there as the kubelet does (started first
	// in the pod half's Run); else none.
	Recorder record.EventRecorder
}

// PodHalf is the pod half of an agent, built in construction order: pod
// sources and their merger, probes, the status writer, mirror pods, the
// RuntimeClasses (podsync/runtimeclass), the backend, admission, the pod workers (podsync.Engine) and eviction.
type PodHalf struct {
	name          string
	view          *heartbeat.NodeView // nil when Options.Node was given
	recorder      record.EventRecorder
	merger        *podsource.Merger
	mirrors       *podsource.MirrorPods
	probes        *probe.Manager
	writer        *status.Writer
	engine        *podsync.Engine
	evictions     *eviction.Manager
	classes       *runtimeclass.Manager
	runtimeStatus podsync.RuntimeStatusSource
	registered    func() bool
	registeredC   <-chan struct{}
	clock         clock.WithTicker
	group         Group
	relay         chan podsource.Update

	// The step (SyncOnce) and its state.
	stepMu    sync.Mutex
	shared    *SharedPods
	sharedGen uint64
	merged    bool     // the shared pods were merged once
	notified  bool     // the probes' changes trigger the engine
	unstepped []string // parts with loops of their own: no SyncOnce
}

// NewPodHalf builds the pod half. It makes no request and starts nothing.
func NewPodHalf(o PodHalfOptions) (*PodHalf, error) {
	switch {
	case o.NodeName == "":
		return nil, optcheck.Required("nodekit: PodHalfOptions.NodeName")
	case o.Backend == nil:
		return nil, optcheck.Required("nodekit: PodHalfOptions.Backend")
	case o.API != nil && o.API.Pods == nil:
		return nil, optcheck.Required("nodekit: PodHalfOptions.API.Pods")
	case o.API != nil && o.API.Nodes == nil && (o.ManifestPath != "" || o.ManifestURL != ""):
		return nil, errors.New("nodekit: PodHalfOptions.API.Nodes is required for mirror pods")
	case o.SharedPods != nil && o.API == nil:
		return nil, errors.New("nodekit: PodHalfOptions.SharedPods needs PodHalfOptions.API (the pods' status is written there)")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	p := &PodHalf{name: o.NodeName, clock: o.Clock, relay: make(chan podsource.Update), shared: o.SharedPods}
	if o.Node == nil {
		p.view = heartbeat.NewNodeView()
		o.Node = p.view
	}
	if r, ok := o.Node.(interface{ Registered() bool }); ok {
		p.registered = r.Registered
	}
	if r, ok := o.Node.(interface{ RegisteredC() <-chan struct{} }); ok {
		p.registeredC = r.RegisteredC()
	}
	if o.HostIPs == nil {
		o.HostIPs = DefaultHostIPs()
	}
	// Events first: every later part records through it.
	p.recorder = o.Recorder
	if p.recorder == nil && o.API != nil && o.API.Events != nil {
		rec := NewEventRecorder(o.API.Events, o.NodeName)
		p.recorder = rec
		_ = p.group.Add("events", rec)
	}

	// Pod sources and their merger.
	sources, err := p.sources(o)
	if err != nil {
		return nil, err
	}
	if p.merger, err = podsource.NewMerger(podsource.MergerOptions{Sources: sources, Clock: o.Clock, Recorder: p.recorder}); err != nil {
		return nil, err
	}
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name()
	}

	// Probes, the status writer and mirror pods.
	prober := o.Prober
	if prober == nil {
		if prober, err = probe.NewHandlers(probe.HandlerOptions{Execer: o.Execer}); err != nil {
			return nil, err
		}
	}
	if p.probes, err = probe.New(probe.Options{Prober: prober, Clock: o.Clock, Registerer: o.Registerer, Recorder: p.recorder}); err != nil {
		return nil, err
	}
	wo := o.Status
	wo.Clock, wo.Registerer = o.Clock, o.Registerer
	if o.API != nil {
		wo.Pods = func(ns string) status.PodClient { return o.API.Pods(ns) }
	}
	if p.writer, err = status.New(wo); err != nil {
		return nil, err
	}
	if o.API != nil && (o.ManifestPath != "" || o.ManifestURL != "") {
		if p.mirrors, err = p.newMirrors(o); err != nil {
			return nil, err
		}
	}

	// RuntimeClasses, as the kubelet's manager: one list-and-watch, when
	// there is an API server to read them from.
	var rco runtimeclass.Options
	if o.API != nil && o.API.RuntimeClasses != nil {
		rco.Client = o.API.RuntimeClasses
	}
	if p.classes, err = runtimeclass.New(rco); err != nil {
		return nil, err
	}

	// The backend.
	triggers := podsync.NewTriggers()
	b, err := o.Backend(podsync.BackendParts{NodeName: o.NodeName, HostIPs: o.HostIPs, Node: o.Node, Probes: p.probes,
		RuntimeClasses: p.classes, Triggers: triggers, Clock: o.Clock, Recorder: p.recorder, Registerer: o.Registerer})
	if err != nil {
		return nil, fmt.Errorf("nodekit: pod backend: %w", err)
	}
	if b.Syncer == nil {
		return nil, errors.New("nodekit: pod backend: no Syncer")
	}
	p.runtimeStatus = b.RuntimeStatus

	// Admission and the pod workers.
	predicates, err := admission.New(admission.Options{Node: p.admissionNode(o)})
	if err != nil {
		return nil, err
	}
	sysctls, err := admission.NewSysctls(admission.SysctlOptions{AllowedUnsafeSysctls: o.AllowedUnsafeSysctls})
	if err != nil {
		return nil, fmt.Errorf("nodekit: PodHalfOptions.AllowedUnsafeSysctls: %w", err)
	}
	var chain admission.Chain
	eo := o.Engine
	if eo.Syncer != nil || eo.Relister != nil || eo.Writer != nil || eo.Probes != nil || eo.Updates != nil || eo.Admit != nil || eo.Triggers != nil || eo.Sources != nil {
		return nil, errors.New("nodekit: PodHalfOptions.Engine: Syncer, Relister, Writer, Probes, Updates, Sources, Admit and Triggers are set by NewPodHalf")
	}
	eo.Syncer, eo.Relister, eo.Writer, eo.Probes, eo.Updates = b.Syncer, b.Relister, p.writer, p.probes, p.relay
	eo.Sources, eo.HostIPs, eo.Admit, eo.Triggers = names, o.HostIPs, &chain, triggers
	eo.Clock, eo.Registerer, eo.Recorder = o.Clock, o.Registerer, p.recorder
	if p.engine, err = podsync.New(eo); err != nil {
		return nil, err
	}

	// Eviction, when the backend can be observed: its admitter goes first,
	// as the kubelet's eviction admit handler does; then sysctls, the
	// predicates, AppArmor and the fields nodekit does not implement, in
	// the kubelet's order.
	if b.Observer != nil {
		vo := o.Eviction
		vo.NodeName, vo.Observer, vo.Reclaimers = o.NodeName, b.Observer, b.Reclaimers
		vo.ActivePods, vo.Killer = p.engine.ActivePods, eviction.KillerFunc(p.engine.Evict)
		vo.PodCleanedUp = func(pod *corev1.Pod) bool {
			l, ok := p.engine.PodLifecycle(pod.UID)
			return !ok || l == podsync.Done
		}
		vo.Clock, vo.Registerer, vo.Recorder = o.Clock, o.Registerer, p.recorder
		if p.evictions, err = eviction.New(vo); err != nil {
			return nil, fmt.Errorf("nodekit: eviction: %w", err)
		}
		chain.Add(p.evictions)
	}
	chain.Add(sysctls)
	chain.Add(predicates)
	chain.Add(admission.AppArmor{Enabled: admission.HostAppArmorEnabled()})
	chain.Add(admission.Unsupported{})

	// The runnables, in start order: sources, RuntimeClasses, the
	// backend's own loops, the writer, probes, the engine, eviction, the
	// relay and mirror pods.
	// What SyncOnce cannot drive: loops of their own.
	for _, s := range sources {
		if s.Name() != podsource.APISource || o.SharedPods == nil {
			p.unstepped = append(p.unstepped, "pod source "+s.Name())
		}
	}
	for _, r := range b.Runnables {
		p.unstepped = append(p.unstepped, "backend loop "+r.Name)
	}
	if rco.Client != nil {
		p.unstepped = append(p.unstepped, "RuntimeClass watch")
	}
	if p.evictions != nil {
		p.unstepped = append(p.unstepped, "eviction manager")
	}
	if p.recorder != o.Recorder {
		p.unstepped = append(p.unstepped, "event recorder (set PodHalfOptions.Recorder)")
	}

	_ = p.group.Add("pod sources", p.merger)
	if rco.Client != nil {
		_ = p.group.Add("runtime classes", p.classes)
	}
	for _, r := range b.Runnables {
		_ = p.group.Add(r.Name, RunnableFunc(r.Run))
	}
	_ = p.group.Add("status writer", p.writer)
	_ = p.group.Add("probes", p.probes)
	_ = p.group.Add("pod sync", p.engine)
	if p.evictions != nil {
		_ = p.group.Add("eviction", p.evictions)
	}
	_ = p.group.Add("pod updates", RunnableFunc(p.runRelay))
	if p.mirrors != nil {
		_ = p.group.Add("mirror pods", RunnableFunc(p.runMirrors))
	}
	return p, nil
}

func (p *PodHalf) sources(o PodHalfOptions) ([]podsource.PodSource, error) {
	sources := append([]podsource.PodSource(nil), o.Sources...)
	if o.ManifestPath != "" {
		f, err := podsource.NewFile(podsource.FileOptions{Path: o.ManifestPath, NodeName: o.NodeName, Period: o.FileCheckFrequency,
			Clock: o.Clock, Recorder: p.recorder})
		if err != nil {
			return nil, fmt.Errorf("nodekit: PodHalfOptions.ManifestPath: %w", err)
		}
		sources = append(sources, f)
	}
	if o.ManifestURL != "" {
		h, err := podsource.NewHTTP(podsource.HTTPOptions{URL: o.ManifestURL, NodeName: o.NodeName, Header: o.ManifestURLHeader,
			Client: &http.Client{}, Period: o.HTTPCheckFrequency, Clock: o.Clock, Recorder: p.recorder})
		if err != nil {
			return nil, fmt.Errorf("nodekit: PodHalfOptions.ManifestURL: %w", err)
		}
		sources = append(sources, h)
	}
	switch {
	case o.SharedPods != nil:
		sources = append(sources, podsource.SourceFunc(podsource.APISource, p.runShared))
	case o.API != nil:
		api, err := podsource.NewAPI(podsource.APIOptions{Pods: o.API.Pods(corev1.NamespaceAll), NodeName: o.NodeName, Clock: o.Clock})
		if err != nil {
			return nil, err
		}
		// The API's pods are taken once the Node is known, as the kubelet
		// starts its API source once its node informer has synced: they
		// are admitted against the Node the API server has.
		sources = append(sources, podsource.SourceFunc(api.Name(), func(ctx context.Context, updates chan<- podsource.Update) error {
			if !p.waitRegistered(ctx) {
				return nil
			}
			return api.Run(ctx, updates)
		}))
	}
	if len(sources) == 0 {
		return nil, errors.New("nodekit: the pod half has no pod source (no API, ManifestPath, ManifestURL or Sources)")
	}
	return sources, nil
}

func (p *PodHalf) newMirrors(o PodHalfOptions) (*podsource.MirrorPods, error) {
	merger, writer, node := p.merger, p.writer, o.Node
	return podsource.NewMirrorPods(podsource.MirrorPodsOptions{
		Pods:       func(ns string) podsource.MirrorPodClient { return o.API.Pods(ns) },
		Nodes:      o.API.Nodes,
		NodeName:   o.NodeName,
		StaticPods: merger.StaticPods,
		Clock:      o.Clock,
		// Mirror pods as the API source's watch shows them: no LIST per sync.
		NodePods: func() ([]*corev1.Pod, bool) { return merger.Pods(podsource.APISource), merger.SeenAllSources() },
		// A restarted agent's mirror pods are orphans only once its
		// manifest directory and URL have been read.
		SourcesReady: merger.SeenAllSources,
		Created:      writer.SetMirrorPod,
		NodeUID: func(context.Context) (types.UID, error) {
			if n := node.Node(); n != nil && n.UID != "" {
				return n.UID, nil
			}
			return "", errors.New("node not registered yet")
		},
	})
}

// admissionNode is the Node pods are admitted against: the Node as the
// node half last read or wrote it, else LocalNode's.
func (p *PodHalf) admissionNode(o PodHalfOptions) func() (*corev1.Node, error) {
	node, local := o.Node, o.LocalNode
	return func() (*corev1.Node, error) {
		if n := node.Node(); n != nil {
			return n, nil
		}
		if local != nil {
			return local()
		}
		return nil, errors.New("the Node is not registered yet")
	}
}

// Run runs the pod half's parts (see Group) until ctx ends or one fails.
// Like the kubelet, it leaves pods running when it stops.
func (p *PodHalf) Run(ctx context.Context) error { return p.group.Run(ctx) }

// Group returns the pod half's runnables, for an agent that runs them in a
// group of its own (Group.AddGroup) instead of calling Run.
func (p *PodHalf) Group() *Group { return &p.group }

// runRelay passes the merged updates on to the engine and asks the mirror
// pods for a sync whenever static pods change, so that a mirror pod is
// created or deleted at once rather than at the next period. As the
// kubelet creates a static pod's mirror pod before it starts the pod, the
// engine gets such a change once that sync has ended (at most
// mirrorFirstWait later; at once while mirror pods do not run, before the
// Node is registered): the pod's start does not compete with the create.
func (p *PodHalf) runRelay(ctx context.Context) error {
	from := p.merger.Updates()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-from:
			if p.mirrors != nil && (u.Source == podsource.FileSource || u.Source == podsource.HTTPSource) {
				p.mirrors.TriggerWait(ctx, mirrorFirstWait)
			}
			select {
			case <-ctx.Done():
				return nil
			case p.relay <- u:
			}
		}
	}
}

// runMirrors runs the mirror pods once the Node is registered, as
// NodeRestriction admits a mirror pod only with an owner reference to it.
func (p *PodHalf) runMirrors(ctx context.Context) error {
	if !p.waitRegistered(ctx) {
		return nil
	}
	return p.mirrors.Run(ctx)
}

// waitRegistered waits until the Node is registered (at once when the
// NodeSource cannot tell); false: ctx ended first. A NodeSource that
// announces the registration (heartbeat.NodeView's RegisteredC) is waited
// on; another is asked every registrationPoll.
func (p *PodHalf) waitRegistered(ctx context.Context) bool {
	if p.registeredC != nil {
		select {
		case <-p.registeredC:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for p.registered != nil && !p.registered() {
		if !loop.Sleep(ctx, p.clock, registrationPoll) {
			return false
		}
	}
	return true
}

// View returns the NodeView the pod half reads the Node from, when it made
// one (PodHalfOptions.Node unset), else nil.
func (p *PodHalf) View() *heartbeat.NodeView { return p.view }

// Recorder returns the pod half's event recorder (nil: none).
func (p *PodHalf) Recorder() record.EventRecorder { return p.recorder }

// Merger returns the merged pod sources.
func (p *PodHalf) Merger() *podsource.Merger { return p.merger }

// MirrorPods returns the mirror pods' manager, nil without an API server
// or static pod sources.
func (p *PodHalf) MirrorPods() *podsource.MirrorPods { return p.mirrors }

// Engine returns the pod workers.
func (p *PodHalf) Engine() *podsync.Engine { return p.engine }

// Probes returns the probe manager.
func (p *PodHalf) Probes() *probe.Manager { return p.probes }

// RuntimeClasses returns the RuntimeClass manager the backend resolves
// pods' runtimeClassName through.
func (p *PodHalf) RuntimeClasses() *runtimeclass.Manager { return p.classes }

// Writer returns the status writer.
func (p *PodHalf) Writer() *status.Writer { return p.writer }

// RuntimeStatus returns the backend's runtime status (the node's Ready
// condition reads it), nil when the backend has none.
func (p *PodHalf) RuntimeStatus() podsync.RuntimeStatusSource { return p.runtimeStatus }

// Eviction returns the eviction manager, nil when the backend cannot be
// observed.
func (p *PodHalf) Eviction() *eviction.Manager { return p.evictions }

// Pods returns the pods the sources want on the node (for a node API's
// /pods and /containerLogs).
func (p *PodHalf) Pods(context.Context) []*corev1.Pod { return p.merger.Pods() }

// PodState is what the engine's last relist saw of a pod, nil when
// nothing.
func (p *PodHalf) PodState(uid types.UID) *podsync.PodState { return p.engine.State(uid) }

// pressureConditions pairs the default setters' names with the eviction
// manager's conditions.
var pressureConditions = []struct {
	setter string
	cond   corev1.NodeConditionType
}{
	{nodestatus.SetterMemoryPressure, corev1.NodeMemoryPressure},
	{nodestatus.SetterDiskPressure, corev1.NodeDiskPressure},
	{nodestatus.SetterPIDPressure, corev1.NodePIDPressure},
}

// pressureSetters returns s with its pressure setters reading the eviction
// manager, when there is one.
func (p *PodHalf) pressureSetters(s nodestatus.Setters) (nodestatus.Setters, error) {
	if p.evictions == nil {
		return s, nil
	}
	for _, pc := range pressureConditions {
		if s.Index(pc.setter) < 0 {
			continue
		}
		var err error
		if s, err = s.Replace(pc.setter, p.evictions.ConditionSetter(pc.cond)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// DefaultHostIPs returns the pods' host IPs when none are given: the
// default-route address, as the node's InternalIP is chosen; nil when
// there is none.
func DefaultHostIPs() []string {
	if ip := hostip.DefaultRoute(); ip != nil {
		return []string{ip.String()}
	}
	return nil
}
