package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit/internal/memlimit"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/logrotate"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/runtime/remote"
)

// config is what the command line says. Zero durations mean "not given", so that the packages apply kubelet's rules for
// defaults that depend on each other (the report frequency follows an explicitly set update frequency). serverTLS is
// --rotate-server-certificates; nodeAPIOff says why the node API is not served though --port asked for it.
type config struct {
	configFile, kubeconfig, hostnameOverride, runtimeEndpoint, providerID, diskUsagePath, diskUsageResource, listen                                       string
	tlsCertFile, tlsKeyFile, certDir, clientCAFile, authzMode, nodeAPIOff                                                                                 string
	podManifestPath, manifestURL, rootDir, podLogRoot, cgroupDriver, cgroupRoot, clusterDomain, resolvConf, podInfraImage                                 string
	statusUpdateFrequency, statusReportFrequency, leaseDuration, runtimeDownAfter, syncFrequency, logMonitorInterval, pendingStatusDelay                  time.Duration
	authzAllowedTTL, authzDeniedTTL, evictionTransition, imageMinAge, fileCheckFrequency, httpCheckFrequency, runtimeRequestTimeout, volumeStatsAggPeriod time.Duration
	registerNode, seccompDefault, cgroupsPerQOS, serverTLS, tokenWebhook, anonymousAuth                                                                   bool
	maxPods, podsPerCore, kubeAPIBurst, logMaxFiles, port, imageGCHigh, imageGCLow                                                                        int
	memoryLimit, logMaxSize, evictionMaxPodGrace                                                                                                          int64
	diskUsageThreshold, kubeAPIQPS                                                                                                                        float64
	address                                                                                                                                               net.IP
	nodeIPs                                                                                                                                               []net.IP
	nodeLabels, evictionHard, evictionSoft, evictionSoftGrace, evictionMinReclaim                                                                         map[string]string
	registerWithTaints                                                                                                                                    []corev1.Taint
	systemReserved, kubeReserved                                                                                                                          corev1.ResourceList
	manifestURLHeader                                                                                                                                     http.Header
	clusterDNS, allowedUnsafeSysctls                                                                                                                      []string
}

const (
	defaultListen    = "127.0.0.1:10248" // kubelet's healthz address
	authzWebhook     = "Webhook"         // the node API's authorization modes
	authzAlwaysAllow = "AlwaysAllow"
)

// flagDef is a flag: its name; the KubeletConfiguration field that sets it from a --config file ("": none) and how that
// field's value reads; where its value goes (*string, *bool, *int, *int64, *float64, *time.Duration or a func(string) error)
// and its default (of that type; nil: zero); the bounds of a number, of any numeric type (lo nil: none; hi nil: no
// upper one); its help.
type flagDef struct {
	name, field    string
	kind           fileKind
	p, def, lo, hi any
	usage          string
}

// or is v, or the zero T if v is nil.
func or[T any](v any) T { t, _ := v.(T); return t }

// parseFlags parses args (without the program name) and the --config file. Errors name the flag, or the file and its
// field for a value from the file. klog's flags (-v, -vmodule, ...) are registered on the same set.
func parseFlags(args []string, stderr io.Writer) (_ *config, err error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	klog.InitFlags(fs)
	c := &config{}
	var fromFile map[string]string // the flags the --config file set: the field that set each
	defer func() {
		for name, field := range fromFile {
			if msg := fmt.Sprint(err); strings.HasPrefix(msg, "--"+name+" ") || strings.HasPrefix(msg, "--"+name+":") {
				err = fmt.Errorf("--config %s: field %q: %w", c.configFile, field, err)
			}
		}
	}()
	var nodeIP, labels, sysRes, kubeRes, address, evHard, evSoft, evSoftGrace, evMinReclaim, memLimit, clusterDNS, sysctls, taints, logMaxSize string
	var leaseSeconds, healthzPort int
	var healthzHost string
	headers := http.Header{}
	addHeader := func(v string) error { // a repeated --manifest-url-header key:value
		k, val, ok := strings.Cut(v, ":")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return fmt.Errorf("%q is not key:value", v)
		}
		headers.Add(k, strings.TrimSpace(val))
		return nil
	}
	defs := []flagDef{
		{"config", "", nil, &c.configFile, nil, nil, nil, "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1) with the fields this agent supports; flags given on the command line override it."},
		{"kubeconfig", "", nil, &c.kubeconfig, nil, nil, nil, "Kubeconfig of the node's identity (system:node:<name>). Empty: standalone, no API server (static pods only; no registration, lease or mirror pods)."},
		{"hostname-override", "", nil, &c.hostnameOverride, nil, nil, nil, "Node name and Hostname address to use instead of the host name (lower-cased)."},
		{"node-ip", "", nil, &nodeIP, nil, nil, nil, "Comma-separated node IPs (one per family) to report as InternalIP. Default: the default-route address."},
		{"node-labels", "", nil, &labels, nil, nil, nil, "Labels to add when registering the node: key=value pairs separated by commas."},
		{"register-node", "registerNode", asBool, &c.registerNode, true, nil, nil, "Register the node with the API server. When false the Node must exist; only its status is written."},
		{"node-status-update-frequency", "nodeStatusUpdateFrequency", asDuration, &c.statusUpdateFrequency, nil, 0, nil, "How often node status is computed (default 10s)."},
		{"node-status-report-frequency", "nodeStatusReportFrequency", asDuration, &c.statusReportFrequency, nil, 0, nil, "How often an unchanged status is posted (default 5m, or the update frequency when only that is given)."},
		{"node-lease-duration-seconds", "nodeLeaseDurationSeconds", asInt, &leaseSeconds, 40, 1, 3600, "Duration of the node lease in seconds; it is renewed every quarter of it."},
		{"container-runtime-endpoint", "containerRuntimeEndpoint", asString, &c.runtimeEndpoint, nil, nil, nil, "CRI endpoint, for example unix:///run/containerd/containerd.sock. Empty: an in-memory fake runtime."},
		{"max-pods", "maxPods", asInt, &c.maxPods, 110, 0, nil, "Pods capacity of the node; pods beyond it are rejected (OutOfpods)."},
		{"pods-per-core", "podsPerCore", asInt, &c.podsPerCore, nil, 0, nil, "When positive, caps pods capacity at this many pods per core. 0: no cap."},
		{"register-with-taints", "registerWithTaints", asTaints, &taints, nil, nil, nil, "Taints the node registers with: key[=value]:Effect, separated by commas."},
		{"provider-id", "providerID", asString, &c.providerID, nil, nil, nil, "spec.providerID of the node when it registers."},
		{"system-reserved", "systemReserved", asPairs("="), &sysRes, nil, nil, nil, "Resources reserved for the system, for example cpu=500m,memory=1Gi."},
		{"kube-reserved", "kubeReserved", asPairs("="), &kubeRes, nil, nil, nil, "Resources reserved for Kubernetes daemons, for example cpu=100m,memory=256Mi."},
		{"runtime-request-timeout", "runtimeRequestTimeout", asDuration, &c.runtimeRequestTimeout, remote.DefaultRequestTimeout, time.Second, remote.MaxTimeout, "How long a call to the runtime may take: RunPodSandbox gets twice as long, StopContainer and ExecSync this plus their own timeout, a pull no limit (kubelet's); between 1s and 1h."},
		{"volume-stats-agg-period", "volumeStatsAggPeriod", asDuration, &c.volumeStatsAggPeriod, usage.DefaultVolumeInterval, usage.MinInterval, usage.MaxInterval, "How often each pod's volumes are measured on disk for its stats (kubelet's); between 1s and 10m (kubelet's 0, no volume stats, is refused)."},
		{"runtime-down-after", "", nil, &c.runtimeDownAfter, nodestatus.DefaultRuntimeDownAfter, time.Second, time.Hour, "How long after the runtime's last good status check the node reports \"container runtime is down\" (kubelet's is fixed at 30s); between 1s and 1h."},
		{"disk-usage-path", "", nil, &c.diskUsagePath, "/", nil, nil, "Directory whose file system the custom DiskUsageHigh condition reports on. Empty: no such condition."},
		{"disk-usage-threshold", "", nil, &c.diskUsageThreshold, 90.0, nil, nil, "Usage in percent at or above which DiskUsageHigh is True."},
		{"disk-usage-resource", "", nil, &c.diskUsageResource, nil, nil, nil, "Extended resource name (for example example.com/scratch) under which to also report the file system's size. Empty: none."},
		{"listen", "", nil, &c.listen, defaultListen, nil, nil, "Local address for /healthz and /metrics. Empty: do not serve."},
		{"healthz-bind-address", "healthzBindAddress", asString, &healthzHost, "127.0.0.1", nil, nil, "Address for /healthz and /metrics when --listen is not given (kubelet's flag)."},
		{"healthz-port", "healthzPort", asInt, &healthzPort, 10248, 0, 65535, "Port for /healthz and /metrics when --listen is not given (kubelet's flag); 0: do not serve."},
		{"memory-limit", "", nil, &memLimit, "0", nil, nil, "Soft memory limit of the Go runtime (debug.SetMemoryLimit) unless GOMEMLIMIT is set. 0: none (GOGC alone)."},
		{"address", "address", asString, &address, "0.0.0.0", nil, nil, "IP address the node API (--port) listens on."},
		{"port", "port", asInt, &c.port, 10250, 0, 65535, "Port of the node API (/stats/summary, /metrics/resource, /pods, /containerLogs, /healthz) over TLS, authenticated and authorized as kubelet's. 0: do not serve."},
		{"tls-cert-file", "tlsCertFile", asString, &c.tlsCertFile, nil, nil, nil, "Serving certificate of the node API (PEM, chain after the leaf), reloaded when it changes. Empty: a self-signed one kept in --cert-dir."},
		{"tls-private-key-file", "tlsPrivateKeyFile", asString, &c.tlsKeyFile, nil, nil, nil, "Private key of --tls-cert-file."},
		{"rotate-server-certificates", "serverTLSBootstrap", asBool, &c.serverTLS, nil, nil, nil, "Request the node API's serving certificate from the API server (a kubernetes.io/kubelet-serving CSR as the node) and serve it once issued, kept in --cert-dir/kubelet-server-current.pem and renewed at 70-90% of its validity. Needs --kubeconfig; not with --tls-cert-file."},
		{"cert-dir", "", nil, &c.certDir, nil, nil, nil, "Directory of the self-signed serving certificate (kubelet.crt, kubelet.key). Default <root-dir>/pki."},
		{"client-ca-file", "", nil, &c.clientCAFile, nil, nil, nil, "CA bundle node API client certificates are verified against (user = CN, groups = O), reloaded when it changes. Empty: client certificates are not accepted."},
		{"authentication-token-webhook", "", nil, &c.tokenWebhook, true, nil, nil, "Authenticate node API bearer tokens with the API server's TokenReview (needs --kubeconfig)."},
		{"anonymous-auth", "", nil, &c.anonymousAuth, nil, nil, nil, "Serve node API requests without credentials as system:anonymous (still authorized)."},
		{"authorization-mode", "", nil, &c.authzMode, nil, nil, nil, "Node API authorization: Webhook (SubjectAccessReview as the node) or AlwaysAllow. Default Webhook with --kubeconfig, AlwaysAllow without."},
		{"authorization-webhook-cache-authorized-ttl", "", nil, &c.authzAllowedTTL, nodeapi.DefaultAuthorizedCacheTTL, 0, nodeapi.MaxCacheTTL, "How long an allowing SubjectAccessReview answer is reused (Webhook mode). 0: not kept; at most 1h."},
		{"authorization-webhook-cache-unauthorized-ttl", "", nil, &c.authzDeniedTTL, nodeapi.DefaultUnauthorizedCacheTTL, 0, nodeapi.MaxCacheTTL, "How long a denying SubjectAccessReview answer is reused (Webhook mode). 0: not kept; at most 1h."},
		{"eviction-hard", "evictionHard", asPairs("<"), &evHard, nil, nil, nil, "Hard eviction thresholds, signal<quantity or signal<percent% separated by commas. Default kubelet's: memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%."},
		{"eviction-soft", "evictionSoft", asPairs("<"), &evSoft, nil, nil, nil, "Soft eviction thresholds, as --eviction-hard; each needs --eviction-soft-grace-period."},
		{"eviction-soft-grace-period", "evictionSoftGracePeriod", asPairs("="), &evSoftGrace, nil, nil, nil, "Grace period of each soft threshold: signal=duration separated by commas."},
		{"eviction-minimum-reclaim", "evictionMinimumReclaim", asPairs("="), &evMinReclaim, nil, nil, nil, "Minimum reclaim per signal once a threshold is met: signal=quantity or percent separated by commas."},
		{"eviction-pressure-transition-period", "evictionPressureTransitionPeriod", asDuration, &c.evictionTransition, nil, 0, nil, "How long a pressure condition stays True after its last threshold cleared (default 5m)."},
		{"eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", asInt, &c.evictionMaxPodGrace, nil, 0, nil, "Grace period in seconds of a pod evicted for a soft threshold (its own when shorter)."},
		{"image-gc-high-threshold", "imageGCHighThresholdPercent", asInt, &c.imageGCHigh, 85, 1, 100, "Image file system usage in percent at or above which unused images are removed; 100: never."},
		{"image-gc-low-threshold", "imageGCLowThresholdPercent", asInt, &c.imageGCLow, 80, nil, nil, "Image file system usage in percent that image garbage collection frees down to."},
		{"minimum-image-ttl-duration", "imageMinimumGCAge", asDuration, &c.imageMinAge, 2 * time.Minute, 0, nil, "Minimum age of an unused image before it is garbage collected."},
		{"pending-status-delay", "", nil, &c.pendingStatusDelay, 500 * time.Millisecond, 0, status.MaxPendingDelay, "How long a pod status that stays Pending (ContainerCreating) may wait to be written, so a pod that starts within it costs one write. 0: write every change at once, as kubelet; at most 10s."},
		{"pod-manifest-path", "staticPodPath", asString, &c.podManifestPath, nil, nil, nil, "Directory of static pod manifests (or one manifest file). Empty: none."},
		{"file-check-frequency", "fileCheckFrequency", asDuration, &c.fileCheckFrequency, 20 * time.Second, time.Second, 24 * time.Hour, "How often --pod-manifest-path is listed again besides inotify."},
		{"manifest-url", "staticPodURL", asString, &c.manifestURL, nil, nil, nil, "URL serving static pods (a Pod, PodList or List). Empty: none."},
		{"manifest-url-header", "staticPodURLHeader", asHeaders, addHeader, nil, nil, nil, "HTTP header key:value sent with --manifest-url requests; may be repeated."},
		{"http-check-frequency", "httpCheckFrequency", asDuration, &c.httpCheckFrequency, 20 * time.Second, time.Second, 24 * time.Hour, "How often --manifest-url is fetched."},
		{"root-dir", "", nil, &c.rootDir, "/var/lib/kubelet", nil, nil, "Directory for the agent's files; pods under <root-dir>/pods."},
		{"pod-log-root", "podLogsDir", asString, &c.podLogRoot, "/var/log/pods", nil, nil, "Directory of the pods' log directories."},
		{"cgroup-driver", "cgroupDriver", asString, &c.cgroupDriver, cri.CgroupfsDriver, nil, nil, "Cgroup driver: cgroupfs or systemd (as the runtime's)."},
		{"cgroup-root", "cgroupRoot", asString, &c.cgroupRoot, "/", nil, nil, "Cgroupfs path the kubepods cgroup lives under."},
		{"allowed-unsafe-sysctls", "allowedUnsafeSysctls", asList, &sysctls, nil, nil, nil, "Comma-separated unsafe sysctls (or prefixes ending in *) pods may set besides the safe ones; pods asking for others are rejected (SysctlForbidden)."},
		{"cluster-dns", "clusterDNS", asList, &clusterDNS, nil, nil, nil, "Comma-separated DNS server IPs for ClusterFirst pods. Empty: pods get the node's resolver."},
		{"cluster-domain", "clusterDomain", asString, &c.clusterDomain, nil, nil, nil, "Cluster domain added to ClusterFirst pods' search paths, for example cluster.local."},
		{"resolv-conf", "resolvConf", asString, &c.resolvConf, "/etc/resolv.conf", nil, nil, "The node's resolver configuration, the base of pods' DNS; \"\" for none."},
		{"sync-frequency", "syncFrequency", asDuration, &c.syncFrequency, time.Minute, time.Second, time.Hour, "How often a running pod is synced again when nothing happens to it."},
		{"pod-infra-container-image", "", nil, &c.podInfraImage, nil, nil, nil, "The sandbox (pause) image the agent makes sure the runtime has before it runs pods (the runtime's configuration chooses the one sandboxes run, as with kubelet). Empty: no check."},
		{"seccomp-default", "seccompDefault", asBool, &c.seccompDefault, nil, nil, nil, "Give containers without a seccomp profile the runtime's default one."},
		{"kube-api-qps", "kubeAPIQPS", asInt, &c.kubeAPIQPS, 50.0, nil, nil, "Requests per second the agent sends the API server at most, averaged (kubelet's default)."},
		{"kube-api-burst", "kubeAPIBurst", asInt, &c.kubeAPIBurst, 100, 1, 100000, "Requests the agent may send at once above --kube-api-qps (kubelet's default)."},
		{"cgroups-per-qos", "cgroupsPerQOS", asBool, &c.cgroupsPerQOS, true, nil, nil, "Keep the kubepods QoS cgroups and one cgroup per pod with the pod's resources (cgroupfs driver; not with the in-memory fake runtime)."},
		{"container-log-max-size", "containerLogMaxSize", asString, &logMaxSize, "10Mi", nil, nil, "Size at which a running container's log is rotated (a quantity, at least 1Ki)."},
		{"container-log-max-files", "containerLogMaxFiles", asInt, &c.logMaxFiles, logrotate.DefaultMaxFiles, 2, 1000, "Log files kept per container, the one written included (at least 2)."},
		{"container-log-monitor-interval", "containerLogMonitorInterval", asDuration, &c.logMonitorInterval, logrotate.DefaultMonitorInterval, 3 * time.Second, time.Hour, "How often container logs are checked for rotation."},
	}
	for _, d := range defs {
		switch p := d.p.(type) {
		case *string:
			fs.StringVar(p, d.name, or[string](d.def), d.usage)
		case *bool:
			fs.BoolVar(p, d.name, or[bool](d.def), d.usage)
		case *int:
			fs.IntVar(p, d.name, or[int](d.def), d.usage)
		case *int64:
			fs.Int64Var(p, d.name, or[int64](d.def), d.usage)
		case *float64:
			fs.Float64Var(p, d.name, or[float64](d.def), d.usage)
		case *time.Duration:
			fs.DurationVar(p, d.name, or[time.Duration](d.def), d.usage)
		case func(string) error:
			fs.Func(d.name, d.usage, p)
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.configFile != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if fromFile, err = applyConfigFile(fs, defs, c.configFile, set); err != nil {
			return nil, err
		}
	}

	given := map[string]bool{} // by the command line or the file
	if fs.Visit(func(f *flag.Flag) { given[f.Name] = true }); (given["healthz-bind-address"] || given["healthz-port"]) && !given["listen"] {
		if c.listen = ""; healthzPort != 0 {
			c.listen = net.JoinHostPort(healthzHost, strconv.Itoa(healthzPort))
		}
	}

	// The checks, in order: the first error is kept.
	fail := func(bad bool, format string, a ...any) {
		if bad && err == nil {
			err = fmt.Errorf(format, a...)
		}
	}
	keep := func(e error) { fail(e != nil, "%w", e) }
	for _, d := range defs {
		keep(d.checkBounds())
	}
	q, e := resource.ParseQuantity(logMaxSize)
	fail(e != nil, "--container-log-max-size %q: %w", logMaxSize, e)
	c.logMaxSize = q.Value()
	fail(c.logMaxSize < 1<<10 || c.logMaxSize > 1<<40, "--container-log-max-size %s must be between 1Ki and 1Ti", logMaxSize)
	fail(c.kubeAPIQPS <= 0 || c.kubeAPIQPS > 10000, "--kube-api-qps %v must be above 0 and at most 10000", c.kubeAPIQPS)
	fail(c.imageGCLow < 1 || c.imageGCLow > c.imageGCHigh, "--image-gc-low-threshold %d must be between 1 and --image-gc-high-threshold (%d)", c.imageGCLow, c.imageGCHigh)
	u, e := url.Parse(c.manifestURL)
	fail(c.manifestURL != "" && (e != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == ""), "--manifest-url %q is not an http(s) URL", c.manifestURL)
	fail(c.manifestURL == "" && len(headers) > 0, "--manifest-url-header needs --manifest-url")
	if len(headers) > 0 {
		c.manifestURLHeader = headers
	}
	fail(c.cgroupDriver != cri.CgroupfsDriver && c.cgroupDriver != cri.SystemdDriver, "--cgroup-driver %q must be %s or %s", c.cgroupDriver, cri.CgroupfsDriver, cri.SystemdDriver)
	for i, p := range []*string{&c.podManifestPath, &c.diskUsagePath, &c.rootDir, &c.podLogRoot} {
		name := []string{"pod-manifest-path", "disk-usage-path", "root-dir", "pod-log-root"}[i]
		if fail(*p == "" && i > 1, "--%s must not be empty", name); *p != "" {
			*p, e = filepath.Abs(*p)
			fail(e != nil, "--%s: %w", name, e)
		}
	}
	fail(!strings.HasPrefix(c.cgroupRoot, "/"), "--cgroup-root %q must be an absolute path", c.cgroupRoot)
	errs := validation.IsDNS1123Subdomain(c.clusterDomain)
	fail(c.clusterDomain != "" && len(errs) > 0, "--cluster-domain %q: %s", c.clusterDomain, strings.Join(errs, "; "))
	if c.resolvConf == "" {
		c.resolvConf = "-" // podsync's "none"
	}

	c.address = net.ParseIP(address)
	fail(c.address == nil, "--address %q is not an IP address", address)
	fail((c.tlsCertFile == "") != (c.tlsKeyFile == ""), "--tls-cert-file and --tls-private-key-file go together")
	fail(c.serverTLS && c.tlsCertFile != "", "--rotate-server-certificates and --tls-cert-file: set one, not both")
	fail(c.serverTLS && c.kubeconfig == "", "--rotate-server-certificates needs --kubeconfig")
	if c.certDir == "" {
		c.certDir = filepath.Join(c.rootDir, "pki")
	}
	if c.authzMode == "" {
		if c.authzMode = authzAlwaysAllow; c.kubeconfig != "" {
			c.authzMode = authzWebhook
		}
	}
	fail(c.authzMode != authzWebhook && c.authzMode != authzAlwaysAllow, "--authorization-mode %q: want %s or %s", c.authzMode, authzWebhook, authzAlwaysAllow)
	fail(c.authzMode == authzWebhook && c.kubeconfig == "", "--authorization-mode=Webhook needs --kubeconfig")
	c.tokenWebhook = c.tokenWebhook && c.kubeconfig != "" // no API server to review tokens without
	if c.port != 0 && !c.tokenWebhook && c.clientCAFile == "" && !c.anonymousAuth {
		// Nothing could authenticate a request: a refusing port is not served.
		c.port, c.nodeAPIOff = 0, "no --client-ca-file, token webhook or --anonymous-auth to authenticate requests with"
	}

	// The comma-separated lists. A signal needs a value; eviction checks signals and values (and names them).
	ip := func(k string) error {
		if net.ParseIP(k) == nil {
			return fmt.Errorf("%q is not an IP address", k)
		}
		return nil
	}
	resources := func(m *corev1.ResourceList) func(k, v string) error {
		return func(k, v string) error {
			q, e := resource.ParseQuantity(strings.TrimSpace(v))
			if put(m, corev1.ResourceName(k), q); e != nil {
				return fmt.Errorf("%s: %w", k, e)
			} else if q.Sign() < 0 {
				return fmt.Errorf("%s: %s is negative", k, v)
			}
			return nil
		}
	}
	signals := func(m *map[string]string) func(k, v string) error {
		return func(k, v string) error { put(m, k, v); return nil }
	}
	for _, l := range []struct {
		flag, s, sep, want string
		f                  func(k, v string) error
	}{
		{"eviction-hard", evHard, "<", "signal<value", signals(&c.evictionHard)},
		{"eviction-soft", evSoft, "<", "signal<value", signals(&c.evictionSoft)},
		{"eviction-soft-grace-period", evSoftGrace, "=", "signal=value", signals(&c.evictionSoftGrace)},
		{"eviction-minimum-reclaim", evMinReclaim, "=", "signal=value", signals(&c.evictionMinReclaim)},
		{"node-labels", labels, "=", "key=value", func(k, v string) error { put(&c.nodeLabels, k, v); return keyValue("label", k, v) }},
		{"system-reserved", sysRes, "=", "name=quantity", resources(&c.systemReserved)},
		{"kube-reserved", kubeRes, "=", "name=quantity", resources(&c.kubeReserved)},
		{"cluster-dns", clusterDNS, "", "an IP address", func(k, _ string) error { c.clusterDNS = append(c.clusterDNS, k); return ip(k) }},
		{"allowed-unsafe-sysctls", sysctls, "", "a sysctl", func(k, _ string) error { c.allowedUnsafeSysctls = append(c.allowedUnsafeSysctls, k); return nil }},
		{"node-ip", nodeIP, "", "an IP address", func(k, _ string) error { c.nodeIPs = append(c.nodeIPs, net.ParseIP(k)); return ip(k) }},
	} {
		keep(each(l.flag, l.s, func(part string) error {
			k, v, ok := part, "", l.sep == ""
			if !ok {
				k, v, ok = strings.Cut(part, l.sep)
			}
			if k = strings.TrimSpace(k); !ok || k == "" || strings.HasPrefix(l.flag, "eviction-") && v == "" {
				return fmt.Errorf("%q is not %s", part, l.want)
			}
			return l.f(k, v)
		}))
	}
	_, e = admission.NewSysctls(admission.SysctlOptions{AllowedUnsafeSysctls: c.allowedUnsafeSysctls})
	fail(e != nil, "--allowed-unsafe-sysctls: %w", e)
	_, e = eviction.ParseThresholds(c.evictionHard, c.evictionSoft, c.evictionSoftGrace, c.evictionMinReclaim)
	fail(e != nil, "--eviction-*: %w", e)
	c.leaseDuration = time.Duration(leaseSeconds) * time.Second
	c.registerWithTaints, e = parseTaints(taints)
	keep(e)
	c.memoryLimit, e = memlimit.Parse(memLimit)
	fail(e != nil, "--memory-limit: %w", e)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// checkBounds is the error of a flag's number outside its bounds.
func (d flagDef) checkBounds() error {
	if d.lo == nil {
		return nil
	}
	num := func(x any) float64 { return reflect.ValueOf(x).Convert(reflect.TypeFor[float64]()).Float() }
	if v := reflect.ValueOf(d.p).Elem().Interface(); d.hi == nil && num(v) < num(d.lo) {
		return fmt.Errorf("--%s %v must be at least %v", d.name, v, d.lo)
	} else if d.hi != nil && (num(v) < num(d.lo) || num(v) > num(d.hi)) {
		return fmt.Errorf("--%s %v must be in [%v, %v]", d.name, v, d.lo, d.hi)
	}
	return nil
}

// each calls f with every comma-separated part of s, trimmed (none if s is empty). Errors start with "--<flag>: ".
func each(flag, s string, f func(string) error) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		if err := f(strings.TrimSpace(part)); err != nil {
			return fmt.Errorf("--%s: %w", flag, err)
		}
	}
	return nil
}

// put sets (*m)[k], making *m if need be.
func put[M ~map[K]V, K comparable, V any](m *M, k K, v V) {
	if *m == nil {
		*m = M{}
	}
	(*m)[k] = v
}

// keyValue checks a label's or a taint's (what) key and value.
func keyValue(what, k, v string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("%s key %q: %s", what, k, strings.Join(errs, "; "))
	} else if errs = validation.IsValidLabelValue(v); len(errs) > 0 {
		return fmt.Errorf("%s %q value %q: %s", what, k, v, strings.Join(errs, "; "))
	}
	return nil
}

// parseTaints parses key[=value]:Effect,... as kubelet's --register-with-taints.
func parseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	err := each("register-with-taints", s, func(part string) error {
		kv, effect, ok := strings.Cut(part, ":")
		t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
		t.Key, t.Value, _ = strings.Cut(kv, "=")
		out = append(out, t)
		if !ok {
			return fmt.Errorf("%q is not key[=value]:Effect", part)
		} else if err := keyValue("taint", t.Key, t.Value); err != nil {
			return err
		} else if !slices.Contains([]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}, t.Effect) {
			return fmt.Errorf("taint %q: effect %q must be NoSchedule, PreferNoSchedule or NoExecute", t.Key, effect)
		}
		return nil
	})
	return out, err
}

// The --config file is kubelet's KubeletConfiguration, read through the flag table (flagDef.field and .kind) rather
// than k8s.io/kubelet's types: those link component-base's configuration and logging machinery for fields the agent
// rejects anyway. unsupportedFields are the v1beta1 fields it rejects as not supported rather than unknown.
var unsupportedFields = strings.Fields(`enableServer readOnlyPort tlsCipherSuites tlsCurvePreferences tlsMinVersion rotateCertificates authentication authorization registryPullQPS registryBurst imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist
	eventRecordQPS eventBurst enableDebuggingHandlers enableContentionProfiling oomScoreAdj streamingConnectionIdleTimeout imageMaximumGCAge kubeletCgroups systemCgroups cpuManagerPolicy singleProcessOOMKill
	cpuManagerPolicyOptions cpuManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy topologyManagerScope topologyManagerPolicyOptions qosReserved hairpinMode podCIDR podPidsLimit runOnce cpuCFSQuota
	cpuCFSQuotaPeriod nodeStatusMaxImages maxOpenFiles contentType serializeImagePulls maxParallelImagePulls mergeDefaultEvictionSettings enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains iptablesMasqueradeBit
	iptablesDropBit featureGates failSwapOn memorySwap containerLogMaxWorkers configMapAndSecretChangeDetectionStrategy reservedSystemCPUs showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable
	defaultPodSysctls volumePluginDir kernelMemcgNotification logging enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff
	reservedMemory enableProfilingHandler enableDebugFlagsHandler memoryThrottlingFactor memoryReservationPolicy tracing localStorageCapacityIsolation imageServiceEndpoint failCgroupV1 userNamespaces`)

// A fileKind turns a --config field's JSON value into the values its flag is set to.
type fileKind func(raw json.RawMessage) ([]string, error)

// decode is the fileKind of a field whose value decodes strictly into a T that format writes as flag values.
func decode[T any](format func(T) []string) fileKind {
	return func(raw json.RawMessage) ([]string, error) {
		var v T
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		err := d.Decode(&v)
		return format(v), err
	}
}

var (
	asString   = decode(func(s string) []string { return []string{s} })
	asDuration = decode(func(d metav1.Duration) []string { return []string{d.Duration.String()} })
	asInt      = decode(func(i int32) []string { return []string{strconv.Itoa(int(i))} })
	asBool     = decode(func(b bool) []string { return []string{strconv.FormatBool(b)} })
	asList     = decode(func(l []string) []string { return []string{strings.Join(l, ",")} })
	asHeaders  = decode(func(h map[string][]string) (out []string) {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			for _, v := range h[k] {
				out = append(out, k+":"+v)
			}
		}
		return out
	})
	asTaints = decode(func(taints []corev1.Taint) (parts []string) {
		for _, t := range taints {
			parts = append(parts, t.Key+"="+t.Value+":"+string(t.Effect)) // key=:Effect has no value
		}
		return []string{strings.Join(parts, ",")}
	})
)

// asPairs is a map written as its flag's "key<sep>value,..." form.
func asPairs(sep string) fileKind {
	return decode(func(m map[string]string) (parts []string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+sep+m[k])
		}
		return []string{strings.Join(parts, ",")}
	})
}

// applyConfigFile reads the KubeletConfiguration at path and sets the flag of every field of defs it has, unless the
// command line set it (set). Errors start with "--config <path>:" and name the field. It returns the flags it set, with
// the field that set each.
func applyConfigFile(fs *flag.FlagSet, defs []flagDef, path string, set map[string]bool) (map[string]string, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("--config %s: "+format, append([]any{path}, a...)...)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fail("%v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil || fields == nil {
		return nil, fail("not a KubeletConfiguration object")
	}
	for _, h := range [][2]string{{"apiVersion", "kubelet.config.k8s.io/v1beta1"}, {"kind", "KubeletConfiguration"}} {
		var got string
		if _ = json.Unmarshal(fields[h[0]], &got); got != h[1] {
			return nil, fail("%s %q is not %s", h[0], got, h[1])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		switch {
		case name == "apiVersion" || name == "kind" || slices.ContainsFunc(defs, func(d flagDef) bool { return d.field == name }):
		case slices.Contains(unsupportedFields, name):
			return nil, fail("field %q is not supported by this agent", name)
		default:
			return nil, fail("unknown field %q", name)
		}
	}
	fromFile := map[string]string{}
	for _, d := range defs {
		raw, ok := fields[d.field]
		if d.field == "" || !ok || set[d.name] || string(raw) == "null" {
			continue
		}
		values, err := d.kind(raw)
		for _, v := range values {
			if err == nil {
				err = fs.Set(d.name, v)
			}
		}
		if err != nil {
			return nil, fail("field %q: %v", d.field, err)
		}
		fromFile[d.name] = d.field
	}
	return fromFile, nil
}
