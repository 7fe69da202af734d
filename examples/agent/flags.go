package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/logrotate"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/status"
)

// config is what the command line says. Zero durations mean "not given", so
// that the packages apply kubelet's rules for defaults that depend on each
// other (the report frequency follows an explicitly set update frequency).
type config struct {
	configFile            string
	kubeconfig            string
	hostnameOverride      string
	nodeIPs               []net.IP
	nodeLabels            map[string]string
	registerNode          bool
	statusUpdateFrequency time.Duration
	statusReportFrequency time.Duration
	leaseDuration         time.Duration
	runtimeEndpoint       string
	maxPods               int
	podsPerCore           int
	registerWithTaints    []corev1.Taint
	providerID            string
	systemReserved        corev1.ResourceList
	kubeReserved          corev1.ResourceList
	runtimeDownAfter      time.Duration
	diskUsagePath         string
	diskUsageThreshold    float64
	diskUsageResource     string
	listen                string
	memoryLimit           int64

	// The node API (kubelet's port).
	address       net.IP
	port          int
	tlsCertFile   string
	tlsKeyFile    string
	serverTLS     bool // --rotate-server-certificates: serverTLSBootstrap
	certDir       string
	clientCAFile  string
	tokenWebhook  bool
	anonymousAuth bool
	authzMode     string
	// How long the node API keeps SubjectAccessReview answers; 0: not
	// kept.
	authzAllowedTTL, authzDeniedTTL time.Duration
	nodeAPIOff                      string // why the node API is not served though --port asked for it

	// Node-pressure eviction and image garbage collection.
	evictionHard        map[string]string
	evictionSoft        map[string]string
	evictionSoftGrace   map[string]string
	evictionMinReclaim  map[string]string
	evictionTransition  time.Duration
	evictionMaxPodGrace int64
	imageGCHigh         int
	imageGCLow          int
	imageMinAge         time.Duration
	pendingStatusDelay  time.Duration

	// The pod half.
	podManifestPath    string
	fileCheckFrequency time.Duration
	manifestURL        string
	manifestURLHeader  http.Header
	httpCheckFrequency time.Duration
	rootDir            string
	podLogRoot         string
	cgroupDriver       string
	cgroupRoot         string
	clusterDNS         []string
	clusterDomain      string
	resolvConf         string
	syncFrequency      time.Duration
	podInfraImage      string
	seccompDefault     bool
	cgroupsPerQOS      bool
	kubeAPIQPS         float64
	kubeAPIBurst       int
	logMaxSize         int64
	logMaxFiles        int
	logMonitorInterval time.Duration
}

// headerFlag is a repeated --manifest-url-header key:value.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string { return "" }

func (f *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return fmt.Errorf("%q is not key:value", v)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(k, strings.TrimSpace(val))
	return nil
}

// defaultListen is kubelet's healthz address.
const defaultListen = "127.0.0.1:10248"

// parseFlags parses args (without the program name) and the --config file.
// Errors name the flag, or the file and its field for a value from the
// file. klog's flags (-v, -vmodule, ...) are registered on the same set.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	var file configFile
	c, err := parseArgs(args, stderr, &file)
	if err != nil {
		for flagName, field := range file.fields {
			if msg := err.Error(); strings.HasPrefix(msg, "--"+flagName+" ") || strings.HasPrefix(msg, "--"+flagName+":") {
				return nil, fmt.Errorf("--config %s: field %q: %w", file.path, field, err)
			}
		}
		return nil, err
	}
	return c, nil
}

// configFile is the --config file as parseArgs applied it: its path, and
// the flags it set with the field that set each.
type configFile struct {
	path   string
	fields map[string]string
}

// parseArgs is parseFlags but for the naming of the file's fields in
// errors: it fills in file.
func parseArgs(args []string, stderr io.Writer, file *configFile) (*config, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	klog.InitFlags(fs)

	c := &config{}
	var (
		nodeIP, labels, sysRes, kubeRes, address  string
		evHard, evSoft, evSoftGrace, evMinReclaim string
		leaseSeconds                              int
		memLimit                                  string
		headers                                   headerFlag
		clusterDNS                                string
		taints                                    string
	)
	fs.StringVar(&c.configFile, "config", "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) with the fields this agent supports; flags given on the command line override it.")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to the kubeconfig of the node's identity (system:node:<name>). Empty: standalone, no API server (static pods only; no registration, lease or mirror pods).")
	fs.StringVar(&c.hostnameOverride, "hostname-override", "", "Node name and Hostname address to use instead of the host name (lower-cased).")
	fs.StringVar(&nodeIP, "node-ip", "", "Comma-separated node IPs (one per family) to report as InternalIP. Default: the default-route address.")
	fs.StringVar(&labels, "node-labels", "", "Labels to add when registering the node: key=value pairs separated by commas.")
	fs.BoolVar(&c.registerNode, "register-node", true, "Register the node with the API server. When false the Node must exist; only its status is written.")
	fs.DurationVar(&c.statusUpdateFrequency, "node-status-update-frequency", 0, "How often node status is computed (default 10s).")
	fs.DurationVar(&c.statusReportFrequency, "node-status-report-frequency", 0, "How often an unchanged status is posted (default 5m, or the update frequency when only that is given).")
	fs.IntVar(&leaseSeconds, "node-lease-duration-seconds", 40, "Duration of the node lease; it is renewed every quarter of it.")
	fs.StringVar(&c.runtimeEndpoint, "container-runtime-endpoint", "", "CRI endpoint, for example unix:///run/containerd/containerd.sock. Empty: an in-memory fake runtime.")
	fs.IntVar(&c.maxPods, "max-pods", 110, "Pods capacity of the node; pods beyond it are rejected (OutOfpods).")
	fs.IntVar(&c.podsPerCore, "pods-per-core", 0, "When positive, caps pods capacity at this many pods per core. 0: no cap.")
	fs.StringVar(&taints, "register-with-taints", "", "Taints the node registers with: key[=value]:Effect, separated by commas.")
	fs.StringVar(&c.providerID, "provider-id", "", "spec.providerID of the node when it registers.")
	fs.StringVar(&sysRes, "system-reserved", "", "Resources reserved for the system, for example cpu=500m,memory=1Gi.")
	fs.StringVar(&kubeRes, "kube-reserved", "", "Resources reserved for Kubernetes daemons, for example cpu=100m,memory=256Mi.")
	fs.DurationVar(&c.runtimeDownAfter, "runtime-down-after", nodestatus.DefaultRuntimeDownAfter, "How long after the runtime's last good status check the node reports \"container runtime is down\" (kubelet's is fixed at 30s); between 1s and 1h.")
	fs.StringVar(&c.diskUsagePath, "disk-usage-path", "/", "Directory whose file system the custom DiskUsageHigh condition reports on. Empty: no such condition.")
	fs.Float64Var(&c.diskUsageThreshold, "disk-usage-threshold", 90, "Usage in percent at or above which DiskUsageHigh is True.")
	fs.StringVar(&c.diskUsageResource, "disk-usage-resource", "", "Extended resource name (for example example.com/scratch) under which to also report the file system's size. Empty: none.")
	fs.StringVar(&c.listen, "listen", defaultListen, "Local address for /healthz and /metrics. Empty: do not serve.")
	fs.StringVar(&memLimit, "memory-limit", "24Mi", "Soft memory limit of the Go runtime (debug.SetMemoryLimit) unless GOMEMLIMIT is set. 0: none.")
	fs.StringVar(&address, "address", "0.0.0.0", "IP address the node API (--port) listens on.")
	fs.IntVar(&c.port, "port", 10250, "Port of the node API (/stats/summary, /metrics/resource, /pods, /containerLogs, /healthz) over TLS, authenticated and authorized as kubelet's. 0: do not serve.")
	fs.StringVar(&c.tlsCertFile, "tls-cert-file", "", "Serving certificate of the node API (PEM, chain after the leaf), read again when it changes on disk. Empty: a self-signed one kept in --cert-dir.")
	fs.StringVar(&c.tlsKeyFile, "tls-private-key-file", "", "Private key of --tls-cert-file.")
	fs.BoolVar(&c.serverTLS, "rotate-server-certificates", false, "Request the node API's serving certificate from the API server (a kubernetes.io/kubelet-serving CertificateSigningRequest as the node; kubelet's serverTLSBootstrap) and serve it once approved and issued, kept in --cert-dir/kubelet-server-current.pem and renewed at 70-90% of its validity. Needs --kubeconfig; not with --tls-cert-file.")
	fs.StringVar(&c.certDir, "cert-dir", "", "Directory of the self-signed serving certificate (kubelet.crt, kubelet.key). Default <root-dir>/pki.")
	fs.StringVar(&c.clientCAFile, "client-ca-file", "", "CA bundle that node API client certificates are verified against (user = CN, groups = O), read again when it changes on disk. Empty: client certificates are not accepted.")
	fs.BoolVar(&c.tokenWebhook, "authentication-token-webhook", true, "Authenticate node API bearer tokens with the API server's TokenReview (needs --kubeconfig).")
	fs.BoolVar(&c.anonymousAuth, "anonymous-auth", false, "Serve node API requests without credentials as system:anonymous (still authorized).")
	fs.StringVar(&c.authzMode, "authorization-mode", "", "Node API authorization: Webhook (SubjectAccessReview as the node) or AlwaysAllow. Default Webhook with --kubeconfig, AlwaysAllow without.")
	fs.DurationVar(&c.authzAllowedTTL, "authorization-webhook-cache-authorized-ttl", nodeapi.DefaultAuthorizedCacheTTL, "How long an allowing SubjectAccessReview answer is reused (Webhook mode). 0: not kept; at most 1h.")
	fs.DurationVar(&c.authzDeniedTTL, "authorization-webhook-cache-unauthorized-ttl", nodeapi.DefaultUnauthorizedCacheTTL, "How long a denying SubjectAccessReview answer is reused (Webhook mode). 0: not kept; at most 1h.")
	fs.StringVar(&evHard, "eviction-hard", "", "Hard eviction thresholds, signal<quantity or signal<percent% separated by commas (memory.available<100Mi,nodefs.available<10%). Default kubelet's: memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%.")
	fs.StringVar(&evSoft, "eviction-soft", "", "Soft eviction thresholds, as --eviction-hard; each needs --eviction-soft-grace-period.")
	fs.StringVar(&evSoftGrace, "eviction-soft-grace-period", "", "Grace period of each soft threshold: signal=duration separated by commas.")
	fs.StringVar(&evMinReclaim, "eviction-minimum-reclaim", "", "Minimum reclaim per signal once a threshold is met: signal=quantity or percent separated by commas.")
	fs.DurationVar(&c.evictionTransition, "eviction-pressure-transition-period", 0, "How long a pressure condition stays True after its last threshold cleared (default 5m).")
	fs.Int64Var(&c.evictionMaxPodGrace, "eviction-max-pod-grace-period", 0, "Grace period in seconds of a pod evicted for a soft threshold (its own when shorter).")
	fs.IntVar(&c.imageGCHigh, "image-gc-high-threshold", 85, "Image file system usage in percent at or above which unused images are removed; 100: never.")
	fs.IntVar(&c.imageGCLow, "image-gc-low-threshold", 80, "Image file system usage in percent that image garbage collection frees down to.")
	fs.DurationVar(&c.imageMinAge, "minimum-image-ttl-duration", 2*time.Minute, "Minimum age of an unused image before it is garbage collected.")
	fs.DurationVar(&c.pendingStatusDelay, "pending-status-delay", 500*time.Millisecond, "How long a pod status that stays Pending (ContainerCreating) may wait before it is written, so a pod that starts within it costs one status write. 0: write every change at once, as kubelet does; at most 10s.")

	fs.StringVar(&c.podManifestPath, "pod-manifest-path", "", "Directory of static pod manifests (or one manifest file). Empty: none.")
	fs.DurationVar(&c.fileCheckFrequency, "file-check-frequency", 20*time.Second, "How often --pod-manifest-path is listed again besides inotify.")
	fs.StringVar(&c.manifestURL, "manifest-url", "", "URL serving static pods (a Pod, PodList or List). Empty: none.")
	fs.Var(&headers, "manifest-url-header", "HTTP header key:value sent with --manifest-url requests; may be repeated.")
	fs.DurationVar(&c.httpCheckFrequency, "http-check-frequency", 20*time.Second, "How often --manifest-url is fetched.")
	fs.StringVar(&c.rootDir, "root-dir", "/var/lib/kubelet", "Directory for the agent's files; pods under <root-dir>/pods.")
	fs.StringVar(&c.podLogRoot, "pod-log-root", "/var/log/pods", "Directory of the pods' log directories.")
	fs.StringVar(&c.cgroupDriver, "cgroup-driver", cri.CgroupfsDriver, "Cgroup driver: cgroupfs or systemd (as the runtime's).")
	fs.StringVar(&c.cgroupRoot, "cgroup-root", "/", "Cgroupfs path the kubepods cgroup lives under.")
	fs.StringVar(&clusterDNS, "cluster-dns", "", "Comma-separated DNS server IPs for ClusterFirst pods. Empty: pods get the node's resolver.")
	fs.StringVar(&c.clusterDomain, "cluster-domain", "", "Cluster domain added to ClusterFirst pods' search paths, for example cluster.local.")
	fs.StringVar(&c.resolvConf, "resolv-conf", "/etc/resolv.conf", "The node's resolver configuration, the base of pods' DNS; \"\" for none.")
	fs.DurationVar(&c.syncFrequency, "sync-frequency", time.Minute, "How often a running pod is synced again when nothing happens to it.")
	fs.StringVar(&c.podInfraImage, "pod-infra-container-image", "", "The sandbox (pause) image. The runtime's own configuration chooses the image sandboxes run, as with kubelet; the agent makes sure the runtime has this one before it runs pods. Empty: no check.")
	fs.BoolVar(&c.seccompDefault, "seccomp-default", false, "Give containers without a seccomp profile the runtime's default one.")
	fs.Float64Var(&c.kubeAPIQPS, "kube-api-qps", 50, "Requests per second the agent sends the API server at most, averaged (kubelet's default).")
	fs.IntVar(&c.kubeAPIBurst, "kube-api-burst", 100, "Requests the agent may send at once above --kube-api-qps (kubelet's default).")
	fs.BoolVar(&c.cgroupsPerQOS, "cgroups-per-qos", true, "Keep the kubepods QoS cgroups and one cgroup per pod with the pod's resources (cgroupfs driver; not with the in-memory fake runtime).")
	logMaxSize := fs.String("container-log-max-size", "10Mi", "Size at which a running container's log is rotated (a quantity, at least 1Ki).")
	fs.IntVar(&c.logMaxFiles, "container-log-max-files", logrotate.DefaultMaxFiles, "Log files kept per container, the one written included (at least 2).")
	fs.DurationVar(&c.logMonitorInterval, "container-log-monitor-interval", logrotate.DefaultMonitorInterval, "How often container logs are checked for rotation.")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.configFile != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		var err error
		file.path = c.configFile
		if file.fields, err = applyConfigFile(fs, c.configFile, set); err != nil {
			return nil, err
		}
	}
	var err error
	q, err := resource.ParseQuantity(*logMaxSize)
	if err != nil {
		return nil, fmt.Errorf("--container-log-max-size %q: %w", *logMaxSize, err)
	}
	c.logMaxSize = q.Value()
	switch {
	case c.kubeAPIQPS <= 0 || c.kubeAPIQPS > 10000:
		return nil, fmt.Errorf("--kube-api-qps %v must be above 0 and at most 10000", c.kubeAPIQPS)
	case c.kubeAPIBurst < 1 || c.kubeAPIBurst > 100000:
		return nil, fmt.Errorf("--kube-api-burst %d must be between 1 and 100000", c.kubeAPIBurst)
	case c.logMaxSize < 1<<10 || c.logMaxSize > 1<<40:
		return nil, fmt.Errorf("--container-log-max-size %s must be between 1Ki and 1Ti", *logMaxSize)
	case c.logMaxFiles < 2 || c.logMaxFiles > 1000:
		return nil, fmt.Errorf("--container-log-max-files %d must be between 2 and 1000", c.logMaxFiles)
	case c.logMonitorInterval < 3*time.Second || c.logMonitorInterval > time.Hour:
		return nil, fmt.Errorf("--container-log-monitor-interval %v must be between 3s and 1h", c.logMonitorInterval)
	}
	if err = c.parsePodFlags(clusterDNS, headers.h); err != nil {
		return nil, err
	}
	if err = c.parseServerFlags(address); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		flag, value string
		sep         string
		into        *map[string]string
	}{
		{"--eviction-hard", evHard, "<", &c.evictionHard},
		{"--eviction-soft", evSoft, "<", &c.evictionSoft},
		{"--eviction-soft-grace-period", evSoftGrace, "=", &c.evictionSoftGrace},
		{"--eviction-minimum-reclaim", evMinReclaim, "=", &c.evictionMinReclaim},
	} {
		if *f.into, err = parseSignalMap(f.value, f.sep); err != nil {
			return nil, fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	// The eviction package checks signals and quantities (and names them);
	// the agent checks what it reads itself.
	if _, err = eviction.ParseThresholds(c.evictionHard, c.evictionSoft, c.evictionSoftGrace, c.evictionMinReclaim); err != nil {
		return nil, fmt.Errorf("--eviction-*: %w", err)
	}
	switch {
	case c.evictionTransition < 0:
		return nil, fmt.Errorf("--eviction-pressure-transition-period %v must not be negative", c.evictionTransition)
	case c.evictionMaxPodGrace < 0:
		return nil, fmt.Errorf("--eviction-max-pod-grace-period %d must not be negative", c.evictionMaxPodGrace)
	case c.imageGCHigh < 1 || c.imageGCHigh > 100:
		return nil, fmt.Errorf("--image-gc-high-threshold %d must be between 1 and 100", c.imageGCHigh)
	case c.imageGCLow < 1 || c.imageGCLow > c.imageGCHigh:
		return nil, fmt.Errorf("--image-gc-low-threshold %d must be between 1 and --image-gc-high-threshold (%d)", c.imageGCLow, c.imageGCHigh)
	case c.imageMinAge < 0:
		return nil, fmt.Errorf("--minimum-image-ttl-duration %v must not be negative", c.imageMinAge)
	}
	if c.nodeIPs, err = parseNodeIPs(nodeIP); err != nil {
		return nil, fmt.Errorf("--node-ip: %w", err)
	}
	if c.nodeLabels, err = parseLabels(labels); err != nil {
		return nil, fmt.Errorf("--node-labels: %w", err)
	}
	if c.systemReserved, err = parseResources(sysRes); err != nil {
		return nil, fmt.Errorf("--system-reserved: %w", err)
	}
	if c.kubeReserved, err = parseResources(kubeRes); err != nil {
		return nil, fmt.Errorf("--kube-reserved: %w", err)
	}
	if leaseSeconds < 1 || leaseSeconds > 3600 {
		return nil, fmt.Errorf("--node-lease-duration-seconds %d must be between 1 and 3600", leaseSeconds)
	}
	c.leaseDuration = time.Duration(leaseSeconds) * time.Second
	if c.statusUpdateFrequency < 0 || c.statusReportFrequency < 0 {
		return nil, fmt.Errorf("--node-status-update-frequency and --node-status-report-frequency must not be negative")
	}
	if c.runtimeDownAfter < time.Second || c.runtimeDownAfter > time.Hour {
		return nil, fmt.Errorf("--runtime-down-after %v must be between 1s and 1h", c.runtimeDownAfter)
	}
	if c.maxPods < 0 {
		return nil, fmt.Errorf("--max-pods %d must not be negative", c.maxPods)
	}
	if c.podsPerCore < 0 {
		return nil, fmt.Errorf("--pods-per-core %d must not be negative", c.podsPerCore)
	}
	if c.registerWithTaints, err = parseTaints(taints); err != nil {
		return nil, fmt.Errorf("--register-with-taints: %w", err)
	}
	if c.diskUsagePath != "" {
		if c.diskUsagePath, err = filepath.Abs(c.diskUsagePath); err != nil {
			return nil, fmt.Errorf("--disk-usage-path: %w", err)
		}
	}
	if memLimit != "0" && memLimit != "" {
		q, err := resource.ParseQuantity(memLimit)
		if err != nil {
			return nil, fmt.Errorf("--memory-limit: %w", err)
		}
		c.memoryLimit = q.Value()
	}
	return c, nil
}

// parseServerFlags checks the node API's flags.
func (c *config) parseServerFlags(address string) error {
	if c.address = net.ParseIP(address); c.address == nil {
		return fmt.Errorf("--address %q is not an IP address", address)
	}
	if c.port < 0 || c.port > 65535 {
		return fmt.Errorf("--port %d must be between 0 and 65535", c.port)
	}
	if (c.tlsCertFile == "") != (c.tlsKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if c.serverTLS && c.tlsCertFile != "" {
		return errors.New("--rotate-server-certificates and --tls-cert-file: set one, not both")
	}
	if c.serverTLS && c.kubeconfig == "" {
		return errors.New("--rotate-server-certificates needs --kubeconfig")
	}
	if c.certDir == "" {
		c.certDir = filepath.Join(c.rootDir, "pki")
	}
	switch c.authzMode {
	case "":
		c.authzMode = authzAlwaysAllow
		if c.kubeconfig != "" {
			c.authzMode = authzWebhook
		}
	case authzWebhook:
		if c.kubeconfig == "" {
			return errors.New("--authorization-mode=Webhook needs --kubeconfig")
		}
	case authzAlwaysAllow:
	default:
		return fmt.Errorf("--authorization-mode %q: want %s or %s", c.authzMode, authzWebhook, authzAlwaysAllow)
	}
	for _, ttl := range []struct {
		flag string
		v    time.Duration
	}{{"authorization-webhook-cache-authorized-ttl", c.authzAllowedTTL}, {"authorization-webhook-cache-unauthorized-ttl", c.authzDeniedTTL}} {
		if ttl.v < 0 || ttl.v > nodeapi.MaxCacheTTL {
			return fmt.Errorf("--%s %v must be between 0 and %v", ttl.flag, ttl.v, nodeapi.MaxCacheTTL)
		}
	}
	if c.kubeconfig == "" {
		c.tokenWebhook = false // no API server to review tokens
	}
	if c.port != 0 && !c.tokenWebhook && c.clientCAFile == "" && !c.anonymousAuth {
		// Nothing could be authenticated: the port would refuse every
		// request. Standalone agents serve it with a client CA or
		// anonymously only.
		c.port, c.nodeAPIOff = 0, "no --client-ca-file, token webhook or --anonymous-auth to authenticate requests with"
	}
	return nil
}

// parseSignalMap parses kubelet's "signal<value,signal<value" (sep "<")
// or "signal=value,..." (sep "="); empty is nil (the defaults).
func parseSignalMap(v, sep string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), sep)
		if !ok || k == "" || val == "" {
			return nil, fmt.Errorf("%q is not signal%svalue", part, sep)
		}
		m[k] = val
	}
	return m, nil
}

// The node API's authorization modes.
const (
	authzWebhook     = "Webhook"
	authzAlwaysAllow = "AlwaysAllow"
)

// parsePodFlags checks the pod half's flags.
func (c *config) parsePodFlags(clusterDNS string, headers http.Header) error {
	if c.pendingStatusDelay < 0 || c.pendingStatusDelay > status.MaxPendingDelay {
		return fmt.Errorf("--pending-status-delay %v must be between 0 and %v", c.pendingStatusDelay, status.MaxPendingDelay)
	}
	if c.fileCheckFrequency < time.Second || c.fileCheckFrequency > 24*time.Hour {
		return fmt.Errorf("--file-check-frequency %v must be between 1s and 24h", c.fileCheckFrequency)
	}
	if c.httpCheckFrequency < time.Second || c.httpCheckFrequency > 24*time.Hour {
		return fmt.Errorf("--http-check-frequency %v must be between 1s and 24h", c.httpCheckFrequency)
	}
	if c.manifestURL != "" {
		u, err := url.Parse(c.manifestURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--manifest-url %q is not an http(s) URL", c.manifestURL)
		}
	} else if len(headers) > 0 {
		return fmt.Errorf("--manifest-url-header needs --manifest-url")
	}
	c.manifestURLHeader = headers
	if c.cgroupDriver != cri.CgroupfsDriver && c.cgroupDriver != cri.SystemdDriver {
		return fmt.Errorf("--cgroup-driver %q must be %s or %s", c.cgroupDriver, cri.CgroupfsDriver, cri.SystemdDriver)
	}
	for _, p := range []struct {
		flag string
		path *string
	}{{"--pod-manifest-path", &c.podManifestPath}, {"--root-dir", &c.rootDir}, {"--pod-log-root", &c.podLogRoot}} {
		if *p.path == "" {
			if p.flag == "--pod-manifest-path" {
				continue
			}
			return fmt.Errorf("%s must not be empty", p.flag)
		}
		abs, err := filepath.Abs(*p.path)
		if err != nil {
			return fmt.Errorf("%s: %w", p.flag, err)
		}
		*p.path = abs
	}
	if c.cgroupRoot == "" || !strings.HasPrefix(c.cgroupRoot, "/") {
		return fmt.Errorf("--cgroup-root %q must be an absolute path", c.cgroupRoot)
	}
	if clusterDNS != "" {
		for _, s := range strings.Split(clusterDNS, ",") {
			s = strings.TrimSpace(s)
			if net.ParseIP(s) == nil {
				return fmt.Errorf("--cluster-dns: %q is not an IP address", s)
			}
			c.clusterDNS = append(c.clusterDNS, s)
		}
	}
	if c.clusterDomain != "" {
		if errs := validation.IsDNS1123Subdomain(c.clusterDomain); len(errs) > 0 {
			return fmt.Errorf("--cluster-domain %q: %s", c.clusterDomain, strings.Join(errs, "; "))
		}
	}
	if c.syncFrequency < time.Second || c.syncFrequency > time.Hour {
		return fmt.Errorf("--sync-frequency %v must be between 1s and 1h", c.syncFrequency)
	}
	if c.resolvConf == "" {
		c.resolvConf = "-" // podsync's "none"
	}
	return nil
}

// nodeName is the name the node registers under: --hostname-override, else
// the host name, lower-cased as kubelet does.
func (c *config) nodeName() (string, error) {
	name := c.hostnameOverride
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("host name: %w", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("node name %q: %s", name, strings.Join(errs, "; "))
	}
	return name, nil
}

func parseNodeIPs(s string) ([]net.IP, error) {
	if s == "" {
		return nil, nil
	}
	var ips []net.IP
	for _, part := range strings.Split(s, ",") {
		ip := net.ParseIP(strings.TrimSpace(part))
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address", part)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

func parseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %q value %q: %s", k, v, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

func parseResources(s string) (corev1.ResourceList, error) {
	if s == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not name=quantity", kv)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: %s is negative", k, v)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// parseTaints parses key[=value]:Effect,... as kubelet's --register-with-taints.
func parseTaints(s string) ([]corev1.Taint, error) {
	if s == "" {
		return nil, nil
	}
	var out []corev1.Taint
	for _, part := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("%q is not key[=value]:Effect", part)
		}
		t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
		t.Key, t.Value, _ = strings.Cut(kv, "=")
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return nil, fmt.Errorf("taint key %q: %s", t.Key, strings.Join(errs, "; "))
		}
		if t.Value != "" {
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return nil, fmt.Errorf("taint %q value %q: %s", t.Key, t.Value, strings.Join(errs, "; "))
			}
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("taint %q: effect %q must be NoSchedule, PreferNoSchedule or NoExecute", t.Key, effect)
		}
		out = append(out, t)
	}
	return out, nil
}
