package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/logrotate"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/podsync/volume"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
)

// runtimeWaitRetry is how long the pod half waits before asking runtimeConn
// again after a failed connection attempt (runtimeConn itself dials with
// back-off meanwhile).
const runtimeWaitRetry = time.Second

// registrationPoll is how often mirror pods check whether the Node is
// registered before they start.
const registrationPoll = 100 * time.Millisecond

// podHalf runs pods: the pod sources (manifest directory, manifest URL, and
// the API server's pods bound to the node) merged by a podsource.Merger;
// mirror pods for static pods when there is an API server; and, once the
// runtime is connected, a podsync Engine on the CRI syncer with a
// probe.Manager, a podsync/status Writer and a podsync/volume Manager for
// the pods' data. Goroutines: one per source, the merger, mirror pods, the
// relay of updates to the engine, the writer, the event broadcaster, the
// probe manager, the engine (with the engine's bounded workers), and the
// volume Manager with one watch per Secret or ConfigMap that pods use and
// one of Services; none per pod.
type podHalf struct {
	cfg      *config
	name     string
	clock    clock.WithTicker
	runtime  *runtimeConn
	status   *runtimeStatus // given the CRI syncer once it exists
	client   *nodeClient    // nil: standalone
	registry prometheus.Registerer

	merger  *podsource.Merger
	mirrors *podsource.MirrorPods // nil: standalone
	// writer is the status writer once Run built it: mirror pods hand it
	// each mirror pod they create, so a static pod's status is written to
	// it at once.
	writer atomic.Pointer[status.Writer]
	// usage samples the node's and the pods' usage once Run has a runtime:
	// the node API's /stats/summary and /metrics/resource.
	usage atomic.Pointer[usage.Collector]
	// engine is the pod workers once Run built them (the node API's view of
	// what runs).
	engine atomic.Pointer[podsync.Engine]
	// pressure hands the eviction manager to the node's pressure
	// conditions; nil in standalone mode (no node status).
	pressure *pressure
	// registered reports whether the Node exists (the heartbeat's
	// Registered); mirror pods start once it does, as NodeRestriction
	// admits a mirror pod only with an owner reference to the Node.
	registered func() bool
	recorder   *eventRecorder
	// allocatable is the Node's allocatable as the heartbeat last wrote it
	// (the downward API's default for unset limits); nil without one.
	allocatable func() corev1.ResourceList
	// node is the node pods are admitted against.
	node *admissionNode

	sources []string // the pod sources' names
}

// newPodHalf builds the sources from cfg. It makes no request.
// With an API server, hb is the node's heartbeat: mirror pods wait for its
// registration and take the Node's UID from it.
func newPodHalf(cfg *config, name string, clk clock.WithTicker, rt *runtimeConn, rs *runtimeStatus, client *nodeClient, hb *heartbeat.Heartbeat, reg prometheus.Registerer) (*podHalf, error) {
	p := &podHalf{cfg: cfg, name: name, clock: clk, runtime: rt, status: rs, client: client, registry: reg, recorder: &eventRecorder{},
		node: &admissionNode{cfg: cfg, name: name, hb: hb, rt: rt, clock: clk}}
	if hb != nil {
		p.allocatable = func() corev1.ResourceList {
			if n := hb.Node(); n != nil {
				return n.Status.Allocatable
			}
			return nil
		}
	}
	var sources []podsource.PodSource
	if cfg.podManifestPath != "" {
		f, err := podsource.NewFile(podsource.FileOptions{Path: cfg.podManifestPath, NodeName: name, Period: cfg.fileCheckFrequency, Clock: clk, Recorder: p.recorder})
		if err != nil {
			return nil, fmt.Errorf("--pod-manifest-path: %w", err)
		}
		sources = append(sources, f)
	}
	if cfg.manifestURL != "" {
		h, err := podsource.NewHTTP(podsource.HTTPOptions{URL: cfg.manifestURL, NodeName: name, Header: cfg.manifestURLHeader,
			Client: &http.Client{}, Period: cfg.httpCheckFrequency, Clock: clk, Recorder: p.recorder})
		if err != nil {
			return nil, fmt.Errorf("--manifest-url: %w", err)
		}
		sources = append(sources, h)
	}
	if client != nil {
		api, err := podsource.NewAPI(podsource.APIOptions{Pods: client.Pods(corev1.NamespaceAll), NodeName: name, Clock: clk})
		if err != nil {
			return nil, err
		}
		sources = append(sources, api)
	}
	if len(sources) == 0 {
		return nil, nil // nothing can ever ask for a pod
	}
	for _, src := range sources {
		p.sources = append(p.sources, src.Name())
	}
	var err error
	if p.merger, err = podsource.NewMerger(podsource.MergerOptions{Sources: sources, Clock: clk, Recorder: p.recorder}); err != nil {
		return nil, err
	}
	if client != nil && (cfg.podManifestPath != "" || cfg.manifestURL != "") {
		merger := p.merger
		mo := podsource.MirrorPodsOptions{Pods: client.mirrorPods, Nodes: client.Nodes(), NodeName: name, StaticPods: merger.StaticPods, Clock: clk,
			// Mirror pods as the API source's watch shows them: no LIST per sync.
			NodePods: func() ([]*corev1.Pod, bool) { return merger.Pods(podsource.APISource), merger.SeenAllSources() },
			// A restarted agent's mirror pods are orphans only once its
			// manifest directory and URL have been read.
			SourcesReady: merger.SeenAllSources,
			Created: func(mirror *corev1.Pod) {
				if w := p.writer.Load(); w != nil {
					w.SetMirrorPod(mirror)
				}
			}}
		if hb != nil {
			p.registered = hb.Registered
			mo.NodeUID = func(context.Context) (types.UID, error) {
				if n := hb.Node(); n != nil && n.UID != "" {
					return n.UID, nil
				}
				return "", errors.New("node not registered yet")
			}
		}
		if p.mirrors, err = podsource.NewMirrorPods(mo); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Run waits for the runtime, then runs the pod half's parts until ctx ends
// or one fails.
func (p *podHalf) Run(ctx context.Context) error {
	rt, err := p.waitRuntime(ctx)
	if err != nil {
		return nil // ctx ended
	}
	ips := p.hostIPs(ctx)
	ensurePauseImage(ctx, rt, p.cfg.podInfraImage)
	admit, err := admission.New(admission.Options{Node: p.node.Node})
	if err != nil {
		return err
	}
	prober, err := probe.NewHandlers(probe.HandlerOptions{Execer: rt})
	if err != nil {
		return err
	}
	probes, err := probe.New(probe.Options{Prober: prober, Clock: p.clock, Registerer: p.registry, Recorder: p.recorder})
	if err != nil {
		return err
	}
	// The pods' volumes, env and pull credentials from the API, read as
	// the node; standalone, pods that reference API objects wait.
	var engine *podsync.Engine
	vopts := volume.Options{Clock: p.clock, Recorder: p.recorder, Allocatable: p.allocatable,
		OnChange: func(uid types.UID) { engine.Trigger(uid) }}
	if p.client != nil {
		p.client.volumeClients(&vopts)
	}
	data, err := volume.New(vopts)
	if err != nil {
		return err
	}
	syncer, err := cri.New(cri.Options{
		PodData:        data,
		Runtime:        rt,
		Probes:         probes,
		Clock:          p.clock,
		PodLogRoot:     p.cfg.podLogRoot,
		PodRoot:        filepath.Join(p.cfg.rootDir, "pods"),
		CgroupDriver:   p.cfg.cgroupDriver,
		CgroupRoot:     p.cfg.cgroupRoot,
		ClusterDNS:     p.cfg.clusterDNS,
		ClusterDomain:  p.cfg.clusterDomain,
		ResolvConf:     p.cfg.resolvConf,
		NodeName:       p.name,
		HostIPs:        ips,
		SeccompDefault: p.cfg.seccompDefault,
		CgroupsPerQOS:  p.cfg.cgroupsPerQOS && !p.runtime.Fake(),
		Registerer:     p.registry,
		Recorder:       p.recorder,
	})
	if err != nil {
		return err
	}
	p.status.cri.Store(syncer)
	collector, err := usage.New(usage.Options{NodeName: p.name, Runtime: rt, Clock: p.clock,
		RootDir: p.cfg.rootDir, PodLogRoot: p.cfg.podLogRoot, PodCgroupDirs: syncer.PodCgroupDirs, PodVolumeDirs: syncer.PodVolumeDirs})
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	p.usage.Store(collector)
	wopts := status.Options{Clock: p.clock, Registerer: p.registry, PendingDelay: p.cfg.pendingStatusDelay}
	if p.client != nil {
		wopts.Pods = p.client.statusPods
	}
	writer, err := status.New(wopts)
	if err != nil {
		return err
	}
	p.writer.Store(writer)
	evictions, imageGC, admitAll, err := p.newEviction(rt, syncer, collector, admit)
	if err != nil {
		return err
	}
	relay := make(chan podsource.Update)
	engine, err = podsync.New(podsync.Options{
		Syncer:       syncer,
		Writer:       writer,
		Probes:       probes,
		Updates:      relay,
		SourcesReady: p.merger.SeenAllSources,
		Sources:      p.sources,
		HostIPs:      ips,
		Admit:        admitAll,
		ResyncPeriod: p.cfg.syncFrequency,
		Clock:        p.clock,
		Registerer:   p.registry,
		Recorder:     p.recorder,
	})
	if err != nil {
		return err
	}
	p.engine.Store(engine)
	if p.pressure != nil {
		p.pressure.m.Store(evictions)
	}
	logs, err := logrotate.New(logrotate.Options{Runtime: rt, MaxSize: p.cfg.logMaxSize, MaxFiles: p.cfg.logMaxFiles,
		MonitorInterval: p.cfg.logMonitorInterval, Clock: p.clock})
	if err != nil {
		return fmt.Errorf("container logs: %w", err)
	}
	comps := []component{
		{name: "pod sources", run: p.merger.Run},
		{name: "container logs", run: logs.Run},
		{name: "status writer", run: writer.Run},
		{name: "probes", run: probes.Run},
		{name: "pod sync", run: engine.Run},
		{name: "pod data", run: data.Run},
		{name: "usage", run: collector.Run},
		{name: "eviction", run: evictions.Run},
		{name: "image GC", run: imageGC.Run},
		{name: "pod updates", run: func(ctx context.Context) error { return p.relay(ctx, relay) }},
	}
	if p.mirrors != nil {
		comps = append(comps, component{name: "mirror pods", run: p.runMirrors})
	}
	klog.FromContext(ctx).Info("Running pods", "manifestPath", p.cfg.podManifestPath, "manifestURL", p.cfg.manifestURL,
		"apiServer", p.client != nil, "podRoot", filepath.Join(p.cfg.rootDir, "pods"))
	if p.client != nil {
		stop := p.recorder.start(ctx, p.client.EventSink(), p.client.Scheme(), p.name)
		defer stop()
	}
	return runComponents(ctx, comps)
}

// hostIPs are the pods' host IPs: --node-ip, else the default-route
// address, as the node's InternalIP is chosen.
func (p *podHalf) hostIPs(ctx context.Context) []string {
	var ips []string
	for _, ip := range p.cfg.nodeIPs {
		ips = append(ips, ip.String())
	}
	if len(ips) > 0 {
		return ips
	}
	ip, err := utilnet.ResolveBindAddress(net.IPv4zero)
	if err != nil || ip == nil || ip.IsUnspecified() {
		klog.FromContext(ctx).Info("No --node-ip and no default-route address: pods get no host IP", "err", err)
		return nil
	}
	return []string{ip.String()}
}

// relay passes the merged updates on to the engine and asks the mirror
// pods for a sync whenever static pods change, so that a mirror pod is
// created or deleted at once rather than at the next period.
func (p *podHalf) relay(ctx context.Context, to chan<- podsource.Update) error {
	from := p.merger.Updates()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-from:
			if p.mirrors != nil && (u.Source == podsource.FileSource || u.Source == podsource.HTTPSource) {
				p.mirrors.Trigger()
			}
			select {
			case <-ctx.Done():
				return nil
			case to <- u:
			}
		}
	}
}

// runMirrors runs the mirror pods once the Node is registered.
func (p *podHalf) runMirrors(ctx context.Context) error {
	for p.registered != nil && !p.registered() {
		t := p.clock.NewTimer(registrationPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
	return p.mirrors.Run(ctx)
}

// waitRuntime returns the runtime once runtimeConn has connected; it fails
// only when ctx ends.
func (p *podHalf) waitRuntime(ctx context.Context) (runtime.Runtime, error) {
	for {
		rt, err := p.runtime.Runtime(ctx)
		if err == nil {
			return rt, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := p.clock.NewTimer(runtimeWaitRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C():
		}
	}
}
