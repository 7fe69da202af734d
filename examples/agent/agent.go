// Command agent is a Kubernetes node agent composed from nodekit behind the kubelet's flags and --config file: it
// registers the node, reports its status, renews its lease, serves /healthz and /metrics and the node API, and runs
// static and API pods on a CRI runtime (or an in-memory fake), as README.md beside this file describes.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/internal/memlimit"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/cri/backend"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/logrotate"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/podsync/volume"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cfg, err := parseFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 2
	}
	defer klog.Flush()
	memlimit.Apply(cfg.memoryLimit)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	a, err := newAgent(cfg, clock.RealClock{})
	if err != nil {
		logger.Error(err, "Cannot start the agent")
		return 1
	}
	if cfg.runtimeEndpoint == "" {
		logger.Info("No --container-runtime-endpoint: using the in-memory fake runtime (nothing runs; the node reports runtime fake://" + runtimetest.DefaultRuntimeVersion + ")")
	}
	logger.Info("Starting node agent", "node", a.name, "runtime", cfg.runtimeEndpoint, "standalone", a.client == nil, "pods", a.pods != nil, "leaseDuration", cfg.leaseDuration)
	if cfg.nodeAPIOff != "" {
		logger.Info("Not serving the node API", "reason", cfg.nodeAPIOff)
	}
	if err = a.Run(klog.NewContext(ctx, logger)); err != nil {
		logger.Error(err, "Agent failed")
		return 1
	}
	logger.Info("Stopped; pods are left running and the node lease to expire", "node", a.name, "standalone", a.client == nil)
	return 0
}

// userAgent is what the agent calls itself in API requests.
const userAgent = "nodekit-agent/" + nodestatus.DefaultKubeletVersion

// agent is a node agent composed from nodekit's node and pod halves.
type agent struct {
	name     string
	client   *nodekit.Client // nil: standalone (no --kubeconfig)
	runtime  runtime.Runtime // the CRI connection, or the in-memory fake
	backend  *backend.Backend
	pods     *nodekit.PodHalf  // nil: no pod source configured
	node     *nodekit.NodeHalf // nil: standalone
	registry *prometheus.Registry
	metrics  http.Handler // the registry in Prometheus' format, on --listen and the node API's /metrics
	group    nodekit.Group
}

// newAgent builds the runtime connection, the pod half, the node half, the node API and the local server, in that
// order. It makes no request, but binds its listeners, so that a busy port is an error at start.
func newAgent(cfg *config, clk clock.WithTicker) (*agent, error) {
	name, err := nodekit.NodeName(cfg.hostnameOverride)
	if err != nil {
		return nil, err
	}
	a := &agent{name: name, registry: prometheus.NewRegistry()}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry})
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
		_ = a.group.Add("heartbeat", a.node)
	}
	if cfg.port != 0 {
		if err = a.newNodeAPI(cfg, clk); err != nil {
			return nil, err
		}
	}
	if cfg.listen != "" {
		hs, err := nodekit.NewHealthServer(cfg.listen, a.metrics)
		if err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		_ = a.group.Add("http", hs)
	}
	return a, nil
}

// newRuntime connects to --container-runtime-endpoint in the background (registration does not wait for it), or runs on
// the in-memory fake.
func (a *agent) newRuntime(cfg *config, clk clock.WithTicker) error {
	if cfg.runtimeEndpoint == "" {
		a.runtime = runtimetest.New(runtimetest.Options{NoCallLog: true})
		return nil
	}
	conn, err := remote.NewConn(remote.ConnOptions{Options: remote.Options{Endpoint: cfg.runtimeEndpoint,
		ConnectionTimeout: 2 * time.Second, RequestTimeout: cfg.runtimeRequestTimeout, Registerer: a.registry}, Clock: clk})
	if err != nil {
		return fmt.Errorf("--container-runtime-endpoint: %w", err)
	}
	a.runtime = conn
	return a.group.Add("runtime", conn)
}

// newClient returns the agent's one API client: protobuf, every request counted, limited by --kube-api-qps and
// --kube-api-burst (client-go's default, 5 per second, would space a pod's status writes 200 ms apart).
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
			CgroupDriver: cfg.cgroupDriver, CgroupRoot: cfg.cgroupRoot, CgroupsPerQOS: cfg.cgroupsPerQOS && !fake, ClusterDNS: cfg.clusterDNS,
			ClusterDomain: cfg.clusterDomain, ResolvConf: cfg.resolvConf, SeccompDefault: cfg.seccompDefault, UserNamespaces: cri.UserNamespaceOptions{MaxPods: cfg.maxPods}},
		Usage: usage.Options{RootDir: cfg.rootDir, VolumeInterval: cfg.volumeStatsAggPeriod},
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
		LocalNode: nodekit.LocalNode(tmpl, so), HostIPs: hostIPs, Execer: a.runtime, AllowedUnsafeSysctls: cfg.allowedUnsafeSysctls,
		Engine: podsync.Options{ResyncPeriod: cfg.syncFrequency},
		Status: status.Options{PendingDelay: cfg.pendingStatusDelay},
		Eviction: eviction.Options{EvictionHard: cfg.evictionHard, EvictionSoft: cfg.evictionSoft,
			EvictionSoftGracePeriod: cfg.evictionSoftGrace, EvictionMinimumReclaim: cfg.evictionMinReclaim,
			PressureTransitionPeriod: cfg.evictionTransition, MaxPodGracePeriod: cfg.evictionMaxPodGrace},
		Clock: clk, Registerer: a.registry,
	})
}

// nodeTemplate is the Node the agent registers: kubelet's default labels, the user's labels, the attach/detach
// annotation kubelet sets, and the taints and provider ID asked for.
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

// Run runs every part until ctx ends or one fails (nodekit.Group). The node lease is left to expire, as kubelet's is.
func (a *agent) Run(ctx context.Context) error { return a.group.Run(ctx) }

// newNodeAPI adds kubelet's port to the agent (nodeapi.Port): TLS with the given, a requested or a self-signed
// certificate, client certificates against --client-ca-file, bearer tokens through TokenReview, and authorization by
// SubjectAccessReview as the node (or AlwaysAllow). It binds the port now, so that a busy port is an error at start.
func (a *agent) newNodeAPI(cfg *config, clk clock.WithTicker) error {
	auth := nodeapi.AuthOptions{ClientCAFile: cfg.clientCAFile, Anonymous: cfg.anonymousAuth, AlwaysAllow: cfg.authzMode != authzWebhook}
	if cfg.tokenWebhook { // only with --kubeconfig
		auth.TokenReviews = a.client.TokenReviews()
	}
	if !auth.AlwaysAllow {
		auth.SubjectAccessReviews = a.client.SubjectAccessReviews()
		// A TTL of 0 (not kept) is nodeapi's -1 (0 is its default).
		auth.AuthorizedCacheTTL, auth.UnauthorizedCacheTTL = cmp.Or(cfg.authzAllowedTTL, -1), cmp.Or(cfg.authzDeniedTTL, -1)
	}
	o := nodeapi.PortOptions{NodeName: a.name, Pods: a.pods, Clock: clk, Registerer: a.registry,
		Handler: nodeapi.Options{PodLogRoot: cfg.podLogRoot, Metrics: a.metrics},
		Server:  nodeapi.ServerOptions{Auth: auth, CertFile: cfg.tlsCertFile, KeyFile: cfg.tlsKeyFile, CertDir: cfg.certDir, IPs: cfg.nodeIPs}}
	if a.pods != nil {
		o.Handler.Stats, o.Handler.Runtime = a.backend.Usage(), a.runtime
	}
	if cfg.serverTLS { // kubelet's serverTLSBootstrap; only with --kubeconfig
		o.ServingCertificates = &nodeapi.ServingCSROptions{CSRs: a.client.CertificateSigningRequests()}
	}
	var err error
	if o.Listener, err = net.Listen("tcp", net.JoinHostPort(cfg.address.String(), strconv.Itoa(cfg.port))); err != nil {
		return fmt.Errorf("--port: %w", err)
	}
	api, err := nodeapi.NewPort(o)
	if err != nil {
		_ = o.Listener.Close()
		return fmt.Errorf("node API: %w", err)
	}
	return a.group.Add("node API", api)
}
