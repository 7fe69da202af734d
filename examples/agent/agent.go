package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/cri/backend"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/logrotate"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/podsync/volume"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// userAgent is what the agent calls itself in API requests.
const userAgent = "nodekit-agent/" + nodestatus.DefaultKubeletVersion

// agent is a node agent composed from nodekit's node and pod halves.
type agent struct {
	name      string
	client    *nodekit.Client // nil: standalone (no --kubeconfig)
	runtime   runtime.Runtime // the CRI connection, or the in-memory fake
	backend   *backend.Backend
	pods      *nodekit.PodHalf     // nil: no pod source configured
	node      *nodekit.NodeHalf    // nil: standalone
	heartbeat *heartbeat.Heartbeat // the node half's; nil: standalone
	setters   nodestatus.Setters
	registry  *prometheus.Registry
	nodeAPI   net.Listener // kubelet's port; nil: --port=0
	group     nodekit.Group
}

// newAgent builds the agent from cfg: the runtime connection, the pod half
// (with the API server: always, its API source's relists giving the node
// its runtime status), the node half, the node API and the local server,
// in that order. It makes no request to the API server or the runtime; it
// does bind its listeners, so that a busy port is an error at start.
func newAgent(cfg *config, clk clock.WithTicker) (*agent, error) {
	name, err := cfg.nodeName()
	if err != nil {
		return nil, err
	}
	a := &agent{name: name, registry: prometheus.NewRegistry()}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.newRuntime(cfg, clk); err != nil {
		return nil, err
	}
	var api *nodekit.API
	if cfg.kubeconfig != "" {
		if a.client, err = newClient(cfg, a.registry); err != nil {
			return nil, err
		}
		api = a.client.API()
	}
	tmpl := nodeTemplate(cfg, name)
	so := statusOptions(cfg, name, a.runtime)
	so.Clock = clk
	if api != nil || cfg.podManifestPath != "" || cfg.manifestURL != "" {
		if a.pods, err = a.newPodHalf(cfg, api, clk, tmpl, so); err != nil {
			return nil, err
		}
		_ = a.group.AddGroup("pods", a.pods.Group())
	}
	if api != nil {
		no := nodekit.NodeHalfOptions{NodeName: name, API: api, Node: tmpl, Status: so, Pods: a.pods, Clock: clk, Registerer: a.registry,
			Heartbeat: heartbeat.Options{NodeStatusUpdateFrequency: cfg.statusUpdateFrequency, NodeStatusReportFrequency: cfg.statusReportFrequency,
				DisableRegistration: !cfg.registerNode, LeaseOptions: lease.Options{LeaseDuration: cfg.leaseDuration}}}
		if no.CustomSetters, err = customSetters(cfg); err != nil {
			return nil, err
		}
		if a.node, err = nodekit.NewNodeHalf(no); err != nil {
			return nil, err
		}
		a.heartbeat, a.setters = a.node.Heartbeat(), a.node.Setters()
		_ = a.group.Add("heartbeat", a.node)
	}
	if cfg.port != 0 {
		if err = a.newNodeAPI(cfg, clk); err != nil {
			return nil, err
		}
	}
	if cfg.listen != "" {
		hs, err := nodekit.NewHealthServer(cfg.listen, a.metricsHandler())
		if err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		_ = a.group.Add("http", hs)
	}
	return a, nil
}

// newRuntime connects to --container-runtime-endpoint in the background
// (registration does not wait for it), or runs on the in-memory fake.
func (a *agent) newRuntime(cfg *config, clk clock.WithTicker) error {
	if cfg.runtimeEndpoint == "" {
		a.runtime = runtimetest.New(runtimetest.Options{NoCallLog: true})
		return nil
	}
	conn, err := remote.NewConn(remote.ConnOptions{Options: remote.Options{Endpoint: cfg.runtimeEndpoint,
		ConnectionTimeout: 2 * time.Second, RequestTimeout: 10 * time.Second}, Clock: clk})
	if err != nil {
		return fmt.Errorf("--container-runtime-endpoint: %w", err)
	}
	a.runtime = conn
	return a.group.Add("runtime", conn)
}

// newClient returns the agent's one API client: protobuf on the wire,
// every request counted, rate-limited as --kube-api-qps and
// --kube-api-burst say (client-go's own default, 5 per second, would space
// a pod's status writes and events 200 ms apart).
func newClient(cfg *config, reg prometheus.Registerer) (*nodekit.Client, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", cfg.kubeconfig, err)
	}
	count, err := nodekit.CountRequests(reg)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst, rc.UserAgent = float32(cfg.kubeAPIQPS), cfg.kubeAPIBurst, userAgent
	rc.Wrap(count)
	return nodekit.NewClient(rc)
}

// newPodHalf builds the pod half on the CRI backend.
func (a *agent) newPodHalf(cfg *config, api *nodekit.API, clk clock.WithTicker, tmpl *corev1.Node, so nodestatus.Options) (*nodekit.PodHalf, error) {
	_, fake := a.runtime.(*runtimetest.Runtime)
	bo := backend.Options{
		Syncer: cri.Options{Runtime: a.runtime, PodLogRoot: cfg.podLogRoot, PodRoot: filepath.Join(cfg.rootDir, "pods"),
			CgroupDriver: cfg.cgroupDriver, CgroupRoot: cfg.cgroupRoot, CgroupsPerQOS: cfg.cgroupsPerQOS && !fake,
			ClusterDNS: cfg.clusterDNS, ClusterDomain: cfg.clusterDomain, ResolvConf: cfg.resolvConf, SeccompDefault: cfg.seccompDefault},
		Usage: usage.Options{RootDir: cfg.rootDir},
		Logs:  logrotate.Options{MaxSize: cfg.logMaxSize, MaxFiles: cfg.logMaxFiles, MonitorInterval: cfg.logMonitorInterval},
		ImageGC: eviction.ImageGCOptions{HighThresholdPercent: cfg.imageGCHigh, LowThresholdPercent: cfg.imageGCLow,
			MinAge: cfg.imageMinAge},
		PauseImage: cfg.podInfraImage,
	}
	if a.client != nil {
		bo.Volume = volume.WithClients(bo.Volume, a.client)
	}
	a.backend = backend.New(bo)
	var hostIPs []string
	for _, ip := range cfg.nodeIPs {
		hostIPs = append(hostIPs, ip.String())
	}
	return nodekit.NewPodHalf(nodekit.PodHalfOptions{
		NodeName: a.name, API: api, Backend: a.backend.Build,
		ManifestPath: cfg.podManifestPath, FileCheckFrequency: cfg.fileCheckFrequency,
		ManifestURL: cfg.manifestURL, ManifestURLHeader: cfg.manifestURLHeader, HTTPCheckFrequency: cfg.httpCheckFrequency,
		LocalNode: nodekit.LocalNode(tmpl, so), HostIPs: hostIPs, Execer: a.runtime,
		Engine: podsync.Options{ResyncPeriod: cfg.syncFrequency},
		Status: status.Options{PendingDelay: cfg.pendingStatusDelay},
		Eviction: eviction.Options{EvictionHard: cfg.evictionHard, EvictionSoft: cfg.evictionSoft,
			EvictionSoftGracePeriod: cfg.evictionSoftGrace, EvictionMinimumReclaim: cfg.evictionMinReclaim,
			PressureTransitionPeriod: cfg.evictionTransition, MaxPodGracePeriod: cfg.evictionMaxPodGrace},
		Clock: clk, Registerer: a.registry,
	})
}

// nodeTemplate is the Node the agent registers: kubelet's default labels,
// the user's labels, the attach/detach annotation kubelet sets, and the
// taints and provider ID asked for.
func nodeTemplate(cfg *config, name string) *corev1.Node {
	n := nodekit.NodeTemplate(name, cfg.nodeLabels)
	n.Spec = corev1.NodeSpec{Taints: cfg.registerWithTaints, ProviderID: cfg.providerID}
	return n
}

// statusOptions are the default setters' options as the flags say.
func statusOptions(cfg *config, name string, rt nodestatus.RuntimeInfo) nodestatus.Options {
	return nodestatus.Options{Hostname: name, NodeIPs: cfg.nodeIPs, Runtime: rt,
		KubeletPort: int32(cfg.port), // 0 (not served): nodestatus's default
		MaxPods:     cfg.maxPods, PodsPerCore: cfg.podsPerCore, SystemReserved: cfg.systemReserved, KubeReserved: cfg.kubeReserved,
		RuntimeDownAfter: cfg.runtimeDownAfter}
}

// customSetters is the custom DiskUsage setter, placed before Ready.
func customSetters(cfg *config) ([]nodestatus.Named, error) {
	if cfg.diskUsagePath == "" {
		return nil, nil
	}
	du, err := nodestatus.DiskUsage(nodestatus.DiskUsageOptions{Path: cfg.diskUsagePath, ThresholdPercent: cfg.diskUsageThreshold,
		ResourceName: corev1.ResourceName(cfg.diskUsageResource)})
	if err != nil {
		return nil, fmt.Errorf("--disk-usage-*: %w", err)
	}
	return []nodestatus.Named{{Name: "DiskUsage", StatusSetter: du}}, nil
}

// Run runs every part until ctx ends or one fails (nodekit.Group). The node
// lease is left to expire, as kubelet's is.
func (a *agent) Run(ctx context.Context) error { return a.group.Run(ctx) }

// metricsHandler serves the agent's registry in Prometheus' format, on
// --listen and on the node API's /metrics.
func (a *agent) metricsHandler() http.Handler {
	return promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry})
}
