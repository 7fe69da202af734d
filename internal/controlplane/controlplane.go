// Package controlplane starts a real kube-apiserver and etcd for tests, with
// the Node authorizer and the NodeRestriction admission plugin on, so that an
// agent can run with the identity a real kubelet has (system:node:<name> in
// group system:nodes).
//
// Start picks free ports on 127.0.0.1, makes a temporary directory, a
// self-signed CA (the API server's client CA too), a serving certificate and
// a service-account signing key, starts etcd and then kube-apiserver, and
// waits (up to a minute each) until etcd's /health and the API server's
// /readyz answer. Clients authenticate with client certificates from the CA:
// an admin in system:masters, and one per node identity. kube-apiserver
// reaches agents' node APIs (kubectl logs, exec, port-forward) with a client
// certificate of the same CA for KubeletClientUser, bound to
// system:kubelet-api-admin; an agent given ClientCAFile as its
// --client-ca-file accepts it. Stop sends SIGTERM
// and, after a few seconds, SIGKILL, then removes the directory. On Linux
// the processes also get SIGKILL if the test binary dies first.
//
// The binaries are built from the Go module proxy by hack/testbin.sh into a
// cache outside the source tree (make testbin). They are found through
// KUBEBUILDER_ASSETS, or else in the cache directory that the script's inputs
// name.
//
// With Options.Aggregator the API server also runs the aggregation layer
// (a front-proxy CA of its own, a proxy client certificate, and routing to
// an APIService's Service endpoints, so no kube-proxy is needed), and
// StartMetricsServer runs the real metrics-server as a host process on
// 127.0.0.1, registered as v1beta1.metrics.k8s.io, so that `kubectl top`
// reads what it scrapes from the nodes.
package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrUnavailable is wrapped by Start's error when the binaries are missing.
var ErrUnavailable = errors.New("control plane binaries not available")

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	dir       string // certificates, keys, etcd's data and the logs
	host      string // https://127.0.0.1:<port>
	ca        *authority
	admin     *rest.Config
	etcd      *process
	apiserver *process

	mu    sync.Mutex
	nodes map[string]*rest.Config
}

// Options configure Start.
type Options struct {
	// AssetsDir holds kube-apiserver, etcd and kubectl. Default: BinaryDir().
	AssetsDir string
	// ExtraAPIServerArgs are added to kube-apiserver's flags (name without
	// dashes, value).
	ExtraAPIServerArgs map[string]string
	// Aggregator turns on the aggregation layer's front proxy (a
	// request-header CA and a proxy client certificate) with routing to
	// the endpoints of an APIService's Service, so that aggregated API
	// servers such as metrics-server (StartMetricsServer) can serve.
	// Default false.
	Aggregator bool
}

// BinaryDir returns the directory holding kube-apiserver, etcd and kubectl:
// KUBEBUILDER_ASSETS when set, else the cache directory hack/testbin.sh builds
// into for the current inputs. It returns an error wrapping ErrUnavailable
// when the binaries are not there.
func BinaryDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		var err error
		if dir, err = cacheDir(); err != nil {
			return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%w: %s not found in %s", ErrUnavailable, b, dir)
		}
	}
	return dir, nil
}

// cacheDir computes the directory hack/testbin.sh uses: the first 16 hex
// digits of the SHA-256 of internal/testbin/go.mod, go.sum and the script.
func cacheDir() (string, error) {
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the source tree")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	h := sha256.New()
	for _, p := range []string{"internal/testbin/go.mod", "internal/testbin/go.sum", "hack/testbin.sh"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	base := os.Getenv("NODEKIT_TESTBIN_CACHE")
	if base == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			cache = filepath.Join(home, ".cache")
		}
		base = filepath.Join(cache, "nodekit", "testbin")
	}
	return filepath.Join(base, key), nil
}

// Bounds on the control plane's own waits.
const (
	// startTimeout bounds each start of etcd or kube-apiserver until it
	// answers healthy, beside the deadline of Start's context.
	startTimeout = time.Minute
	// stopGrace is how long a process has to exit after SIGTERM before it
	// gets SIGKILL. kube-apiserver is told to give open watches one second
	// (--shutdown-watch-termination-grace-period) and exits within about
	// that; should it not, killing it loses nothing (the state is in etcd).
	stopGrace = 5 * time.Second
	// pollInterval is the pause between health checks during a start.
	pollInterval = 50 * time.Millisecond
	// startAttempts bounds Start's attempts when a process exits during
	// start-up.
	startAttempts = 3
)

// Start starts etcd and kube-apiserver and waits until they serve.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	binDir := opts.AssetsDir
	if binDir == "" {
		var err error
		if binDir, err = BinaryDir(); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, fmt.Errorf("%w: %s not found in %s", ErrUnavailable, b, binDir)
		}
	}
	var cp *ControlPlane
	for attempt := 1; ; attempt++ {
		dir, err := os.MkdirTemp("", "nodekit-controlplane-")
		if err != nil {
			return nil, err
		}
		cp = &ControlPlane{dir: dir, nodes: map[string]*rest.Config{}}
		err = cp.start(ctx, binDir, opts)
		if err == nil {
			break
		}
		_ = cp.Stop()
		// A process that exited at once most likely lost one of its free
		// ports to another process between the check and its bind: try
		// again with new ports.
		if !errors.Is(err, errExited) || attempt == startAttempts || ctx.Err() != nil {
			return nil, fmt.Errorf("starting control plane (attempt %d): %w", attempt, err)
		}
	}
	if err := cp.ensureNamespace(ctx, corev1.NamespaceNodeLease); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	if err := cp.bindKubeletClient(ctx); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(ctx context.Context, binDir string, opts Options) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	apiPort := ports[2]
	cp.host = fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	if cp.ca, err = newAuthority("nodekit-controlplane-ca"); err != nil {
		return err
	}
	servingCert, servingKey, err := cp.ca.serving(
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)})
	if err != nil {
		return err
	}
	saKey, err := serviceAccountKey()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt":              cp.ca.certPEM,
		"apiserver.crt":       servingCert,
		"apiserver.key":       servingKey,
		"service-account.key": saKey,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cp.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	if cp.admin, err = cp.userConfig("nodekit-admin", []string{"system:masters"}); err != nil {
		return err
	}

	cp.etcd = newProcess(binDir, cp.dir, "etcd", []string{
		"--name=nodekit",
		"--data-dir=" + filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=nodekit=" + peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	})
	if err := cp.etcd.start(); err != nil {
		return err
	}
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	if err := waitHealthy(ctx, cp.etcd, plain, etcdURL+"/health"); err != nil {
		return err
	}

	flags := map[string]string{
		"etcd-servers":                     etcdURL,
		"bind-address":                     "127.0.0.1",
		"secure-port":                      strconv.Itoa(apiPort),
		"tls-cert-file":                    filepath.Join(cp.dir, "apiserver.crt"),
		"tls-private-key-file":             filepath.Join(cp.dir, "apiserver.key"),
		"client-ca-file":                   filepath.Join(cp.dir, "ca.crt"),
		"cert-dir":                         cp.dir,
		"service-cluster-ip-range":         "10.0.0.0/24",
		"allow-privileged":                 "true",
		"authorization-mode":               "Node,RBAC",
		"enable-admission-plugins":         "NodeRestriction",
		"disable-admission-plugins":        "ServiceAccount",
		"service-account-issuer":           cp.host + "/",
		"service-account-key-file":         filepath.Join(cp.dir, "service-account.key"),
		"service-account-signing-key-file": filepath.Join(cp.dir, "service-account.key"),
		// Open watches end within a second of SIGTERM; without this
		// kube-apiserver waits for them far longer than stopGrace.
		"shutdown-watch-termination-grace-period": "1s",
	}
	kubeletFlags, err := cp.kubeletClientFlags()
	if err != nil {
		return err
	}
	maps.Copy(flags, kubeletFlags)
	if opts.Aggregator {
		if err := cp.aggregatorFlags(flags); err != nil {
			return err
		}
	}
	for k, v := range opts.ExtraAPIServerArgs {
		flags[k] = v
	}
	args := make([]string, 0, len(flags))
	for k, v := range flags {
		args = append(args, "--"+k+"="+v)
	}
	sort.Strings(args)
	cp.apiserver = newProcess(binDir, cp.dir, "kube-apiserver", args)
	return cp.startAPIServer(ctx)
}

// startAPIServer starts kube-apiserver and waits until /readyz answers 200.
func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	if err := cp.apiserver.start(); err != nil {
		return err
	}
	tlsConfig, err := rest.TLSConfigFor(cp.admin)
	if err != nil {
		return err
	}
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true},
		Timeout:   5 * time.Second,
	}
	return waitHealthy(ctx, cp.apiserver, client, cp.host+"/readyz")
}

// waitHealthy polls url until it answers 200, p exits, ctx ends or
// startTimeout passes.
func waitHealthy(ctx context.Context, p *process, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		if err := p.exited(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy: %w (last check: %v); end of %s:\n%s", p.name, ctx.Err(), last, p.logPath, p.logTail(2048))
		case <-tick.C:
		}
	}
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 at the moment of
// the call.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// userConfig returns a REST config that authenticates with a client
// certificate for user in groups.
func (cp *ControlPlane) userConfig(user string, groups []string) (*rest.Config, error) {
	certPEM, keyPEM, err := cp.ca.client(user, groups)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: cp.host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.ca.certPEM,
			CertData: certPEM,
			KeyData:  keyPEM,
		},
		// A test's API server is its own: no client-side throttling to
		// speak of.
		QPS:   1000,
		Burst: 2000,
	}, nil
}

func (cp *ControlPlane) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := cp.AdminClient().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// Stop stops kube-apiserver and etcd (each SIGTERM, then SIGKILL after a
// few seconds) and removes their files. It may be called more than once.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, p := range []*process{cp.apiserver, cp.etcd} {
		if p == nil {
			continue
		}
		if err := p.stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(cp.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AdminConfig returns a cluster-admin REST config.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.admin) }

// AdminClient returns a cluster-admin clientset.
func (cp *ControlPlane) AdminClient() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(cp.AdminConfig())
}

// NodeConfig returns a REST config whose identity is system:node:<name> in
// group system:nodes, as a kubelet's is.
func (cp *ControlPlane) NodeConfig(name string) (*rest.Config, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cfg, ok := cp.nodes[name]; ok {
		return rest.CopyConfig(cfg), nil
	}
	cfg, err := cp.userConfig("system:node:"+name, []string{"system:nodes"})
	if err != nil {
		return nil, fmt.Errorf("adding node identity %s: %w", name, err)
	}
	cp.nodes[name] = cfg
	return rest.CopyConfig(cfg), nil
}

// NodeClient returns a clientset whose identity is system:node:<name>.
func (cp *ControlPlane) NodeClient(name string) (kubernetes.Interface, error) {
	cfg, err := cp.NodeConfig(name)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// StopAPIServer stops kube-apiserver and leaves etcd running: SIGTERM, which
// ends open watches within a second, then SIGKILL if it has not exited
// within a few seconds. StartAPIServer brings it back on the same address
// with the same certificates.
func (cp *ControlPlane) StopAPIServer() error {
	return cp.apiserver.stop(stopGrace)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer and waits
// until it is ready.
func (cp *ControlPlane) StartAPIServer() error {
	return cp.startAPIServer(context.Background())
}

// APIServerPID returns the process ID of kube-apiserver, or 0 while it is
// not running, for reading its CPU and memory from /proc.
func (cp *ControlPlane) APIServerPID() int { return cp.apiserver.pid() }

// EtcdPID returns the process ID of etcd, or 0 while it is not running.
func (cp *ControlPlane) EtcdPID() int { return cp.etcd.pid() }

// Host returns the API server's URL.
func (cp *ControlPlane) Host() string { return cp.host }

// WriteKubeconfig writes cfg (one of this control plane's configs) as a
// kubeconfig file at path.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["nodekit"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["nodekit"] = &clientcmdapi.Context{Cluster: "nodekit", AuthInfo: "user"}
	kc.CurrentContext = "nodekit"
	return clientcmd.WriteToFile(*kc, path)
}
