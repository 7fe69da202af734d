package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/optcheck"
)

// What StartMetricsServer creates, all in kube-system or cluster-wide. One
// metrics-server runs per control plane at a time.
const (
	// MetricsServerNamespace holds its ServiceAccount, Service and
	// EndpointSlice.
	MetricsServerNamespace = "kube-system"
	// MetricsServerName names its ServiceAccount, Service and
	// EndpointSlice, and prefixes its RBAC objects.
	MetricsServerName = "metrics-server"
	// MetricsServerUser is the identity it authenticates with, to the API
	// server and to the nodes: its ServiceAccount's token.
	MetricsServerUser = "system:serviceaccount:" + MetricsServerNamespace + ":" + MetricsServerName
	// MetricsAPIService is the APIService it registers.
	MetricsAPIService = "v1beta1.metrics.k8s.io"

	// DefaultMetricResolution is metrics-server's --metric-resolution:
	// how often it scrapes every node.
	DefaultMetricResolution = 15 * time.Second
	// MinMetricResolution is metrics-server's own lower bound.
	MinMetricResolution = 10 * time.Second
	// metricsServerTokenLifetime is how long its token lasts; like the
	// certificates, long enough for a demo cluster left running.
	metricsServerTokenLifetime = certLifetime
)

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// MetricsServerOptions configure StartMetricsServer.
type MetricsServerOptions struct {
	// AssetsDir holds the metrics-server binary. Default: BinaryDir().
	AssetsDir string
	// KubeletCAFile is a PEM bundle the nodes' serving certificates are
	// verified against (metrics-server's --kubelet-certificate-authority):
	// for an examples/agent node serving its self-signed certificate, its
	// <cert-dir>/kubelet.crt, which names the node's addresses. Empty:
	// --kubelet-insecure-tls, for nodes whose certificates cannot be
	// verified at the address metrics-server dials: a kubelet's
	// self-signed certificate names only its host name, and each node
	// makes its own when it starts.
	KubeletCAFile string
	// MetricResolution is how often every node is scraped. Default
	// DefaultMetricResolution (15s); MinMetricResolution (10s) to 1h.
	MetricResolution time.Duration
	// WithoutNodeMetrics leaves out get on nodes/metrics, which a node
	// (the kubelet, or the agent with --authorization-mode=Webhook)
	// authorizes /metrics/resource with, so its scrapes are forbidden
	// until GrantNodeMetrics. Default false: granted from the start.
	WithoutNodeMetrics bool
	// ExtraArgs are added to metrics-server's flags (name without dashes,
	// value), replacing those of the same name.
	ExtraArgs map[string]string
}

// MetricsServer is a running metrics-server registered as the API
// server's v1beta1.metrics.k8s.io. It runs as a host process on
// 127.0.0.1, authenticates as MetricsServerUser with a ServiceAccount
// token, reaches each node at its InternalIP and the port of its
// daemonEndpoints, and is reached by the API server through the
// EndpointSlice of its Service.
type MetricsServer struct {
	cp     *ControlPlane
	dir    string
	port   int
	proc   *process
	client kubernetes.Interface
	dyn    dynamic.Interface
}

// StartMetricsServer starts metrics-server against cp, which must have
// been started with Options.Aggregator, and waits (up to a minute, or
// until ctx ends) until the API server reports its APIService Available.
// It creates a ServiceAccount with a token, the RBAC metrics-server needs
// (get, list and watch of nodes and pods, get of nodes/metrics unless
// WithoutNodeMetrics, system:auth-delegator, and reading the
// extension-apiserver-authentication ConfigMap), a serving certificate
// from the cluster CA for its Service's name, a Service and EndpointSlice
// for 127.0.0.1:<its port>, and the APIService. Stop undoes all of it.
func (cp *ControlPlane) StartMetricsServer(ctx context.Context, opts MetricsServerOptions) (*MetricsServer, error) {
	if opts.MetricResolution == 0 {
		opts.MetricResolution = DefaultMetricResolution
	}
	if err := optcheck.Range("MetricsServerOptions.MetricResolution", opts.MetricResolution, MinMetricResolution, time.Hour); err != nil {
		return nil, err
	}
	if opts.KubeletCAFile != "" {
		if _, err := os.Stat(opts.KubeletCAFile); err != nil {
			return nil, fmt.Errorf("MetricsServerOptions.KubeletCAFile: %w", err)
		}
	}
	binDir := opts.AssetsDir
	if binDir == "" {
		var err error
		if binDir, err = BinaryDir(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(binDir, "metrics-server")); err != nil {
		return nil, fmt.Errorf("%w: metrics-server not found in %s", ErrUnavailable, binDir)
	}
	dir, err := os.MkdirTemp("", "nodekit-metrics-server-")
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// The API server warns that FQDN slices are deprecated (see
	// register): said once here, not on every start.
	quiet := cp.AdminConfig()
	quiet.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(quiet)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ms := &MetricsServer{cp: cp, dir: dir, client: client, dyn: dyn}
	if err := ms.start(ctx, binDir, opts); err != nil {
		return nil, errors.Join(err, ms.Stop())
	}
	return ms, nil
}

func (ms *MetricsServer) start(ctx context.Context, binDir string, opts MetricsServerOptions) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := ms.cp.ensureNamespace(ctx, MetricsServerNamespace); err != nil {
		return err
	}
	token, err := ms.createIdentity(ctx, !opts.WithoutNodeMetrics)
	if err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	ms.port = ports[0]
	svcHost := MetricsServerName + "." + MetricsServerNamespace + ".svc"
	certPEM, keyPEM, err := ms.cp.ca.serving([]string{svcHost, "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	cfg := &rest.Config{Host: ms.cp.host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ms.cp.ca.certPEM}}
	kubeconfig := filepath.Join(ms.dir, "kubeconfig")
	if err := WriteKubeconfig(cfg, kubeconfig); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"serving.crt": certPEM, "serving.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(ms.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	flags := map[string]string{
		"bind-address":         "127.0.0.1",
		"secure-port":          strconv.Itoa(ms.port),
		"tls-cert-file":        filepath.Join(ms.dir, "serving.crt"),
		"tls-private-key-file": filepath.Join(ms.dir, "serving.key"),
		// Its own identity for the nodes and for listing them, and for
		// the TokenReviews, SubjectAccessReviews and the request-header
		// CA (in kube-system's extension-apiserver-authentication) that
		// check the API server's proxied requests.
		"kubeconfig":                      kubeconfig,
		"authentication-kubeconfig":       kubeconfig,
		"authorization-kubeconfig":        kubeconfig,
		"kubelet-preferred-address-types": "InternalIP",
		// The node API's port is the one its Node reports, not 10250.
		"kubelet-use-node-status-port": "true",
		"metric-resolution":            opts.MetricResolution.String(),
	}
	if opts.KubeletCAFile != "" {
		flags["kubelet-certificate-authority"] = opts.KubeletCAFile
	} else {
		// See MetricsServerOptions.KubeletCAFile: without a CA that signed
		// the nodes' certificates for the addresses dialled, the only way
		// to scrape is not to verify them. The nodes still authenticate
		// and authorize metrics-server's token.
		flags["kubelet-insecure-tls"] = "true"
	}
	for k, v := range opts.ExtraArgs {
		flags[k] = v
	}
	args := make([]string, 0, len(flags))
	for k, v := range flags {
		args = append(args, "--"+k+"="+v)
	}
	sort.Strings(args)
	ms.proc = newProcess(binDir, ms.dir, "metrics-server", args)
	if err := ms.proc.start(); err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ms.cp.ca.cert)
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true},
		Timeout:   5 * time.Second,
	}
	if err := waitHealthy(ctx, ms.proc, client, fmt.Sprintf("https://127.0.0.1:%d/healthz", ms.port)); err != nil {
		if strings.Contains(ms.proc.logTail(4096), "unable to get openapi models") {
			// metrics-server v0.8.0's generated OpenAPI names its types
			// by Go path; k8s.io/metrics v0.37 names them io.k8s.…
			// (OpenAPIModelName), so a build that takes k8s.io modules
			// newer than its own go.mod's (v0.33) panics at start.
			return fmt.Errorf("%w: this metrics-server was built with newer k8s.io modules than its go.mod requires and cannot start; build it from its own module (go install sigs.k8s.io/metrics-server/cmd/metrics-server@v0.8.0): %v", ErrUnavailable, err)
		}
		return err
	}
	if err := ms.register(ctx); err != nil {
		return err
	}
	return ms.waitAvailable(ctx)
}

// createIdentity creates the ServiceAccount, its RBAC and a token, which
// it returns.
func (ms *MetricsServer) createIdentity(ctx context.Context, nodeMetrics bool) (string, error) {
	c := ms.client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MetricsServerName, Namespace: MetricsServerNamespace}}
	if _, err := c.CoreV1().ServiceAccounts(MetricsServerNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating metrics-server's ServiceAccount: %w", err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MetricsServerName, Namespace: MetricsServerNamespace}}
	readRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ms.readRole()},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	metricsRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ms.nodeMetricsRole()},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
		},
	}
	for _, r := range []*rbacv1.ClusterRole{readRole, metricsRole} {
		if err := create(ctx, "ClusterRole "+r.Name, func() error {
			_, err := c.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
			return err
		}); err != nil {
			return "", err
		}
	}
	bindings := map[string]string{ms.readRole(): ms.readRole(), ms.delegatorBinding(): "system:auth-delegator"}
	if nodeMetrics {
		bindings[ms.nodeMetricsRole()] = ms.nodeMetricsRole()
	}
	for name, role := range bindings {
		if err := ms.bindClusterRole(ctx, name, role); err != nil {
			return "", err
		}
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ms.authReaderBinding(), Namespace: MetricsServerNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   subject,
	}
	if err := create(ctx, "RoleBinding "+rb.Name, func() error {
		_, err := c.RbacV1().RoleBindings(MetricsServerNamespace).Create(ctx, rb, metav1.CreateOptions{})
		return err
	}); err != nil {
		return "", err
	}
	tr, err := c.CoreV1().ServiceAccounts(MetricsServerNamespace).CreateToken(ctx, MetricsServerName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(metricsServerTokenLifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting metrics-server's token: %w", err)
	}
	return tr.Status.Token, nil
}

// GrantNodeMetrics binds get on nodes/metrics to metrics-server, after a
// start with WithoutNodeMetrics. Nodes that cached the denial (the agent
// for --authorization-webhook-cache-unauthorized-ttl) allow its scrapes
// once that expires.
func (ms *MetricsServer) GrantNodeMetrics(ctx context.Context) error {
	return ms.bindClusterRole(ctx, ms.nodeMetricsRole(), ms.nodeMetricsRole())
}

func (ms *MetricsServer) bindClusterRole(ctx context.Context, name, role string) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MetricsServerName, Namespace: MetricsServerNamespace}},
	}
	return create(ctx, "ClusterRoleBinding "+name, func() error {
		_, err := ms.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
		return err
	})
}

// create runs a create call; an object that exists already is fine.
func create(ctx context.Context, what string, call func() error) error {
	if err := call(); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s: %w", what, err)
	}
	return nil
}

func (ms *MetricsServer) readRole() string { return "nodekit:" + MetricsServerName }
func (ms *MetricsServer) nodeMetricsRole() string {
	return "nodekit:" + MetricsServerName + ":nodes-metrics"
}
func (ms *MetricsServer) delegatorBinding() string {
	return "nodekit:" + MetricsServerName + ":auth-delegator"
}
func (ms *MetricsServer) authReaderBinding() string {
	return "nodekit:" + MetricsServerName + ":auth-reader"
}

// register creates the Service, its EndpointSlice and the APIService.
func (ms *MetricsServer) register(ctx context.Context) error {
	c := ms.client
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServerName, Namespace: MetricsServerNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(ms.port)),
		}}},
	}
	if _, err := c.CoreV1().Services(MetricsServerNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating metrics-server's Service: %w", err)
	}
	// Validation refuses loopback addresses in IPv4 EndpointSlices (and in
	// Endpoints), and metrics-server listens on 127.0.0.1 only. An FQDN
	// slice takes "127.0.0.1" as a name, and the API server's endpoint
	// routing (--enable-aggregator-routing) dials an endpoint's first
	// address with the slice's port as host:port, so it reaches
	// 127.0.0.1:<port>. No controller manages a Service without a selector,
	// so nothing replaces the slice. FQDN slices are deprecated (v1.37
	// warns); should they go, metrics-server must listen on an address
	// that is not loopback.
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServerName, Namespace: MetricsServerNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: MetricsServerName,
			discoveryv1.LabelManagedBy:   "nodekit-controlplane",
		}},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"127.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(ms.port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := c.DiscoveryV1().EndpointSlices(MetricsServerNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating metrics-server's EndpointSlice: %w", err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": MetricsAPIService},
		"spec": map[string]any{
			"group":                "metrics.k8s.io",
			"version":              "v1beta1",
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
			// Its serving certificate is the cluster CA's, for the
			// Service's name, which the API server checks.
			"caBundle": ms.cp.ca.certPEM,
			"service": map[string]any{
				"namespace": MetricsServerNamespace,
				"name":      MetricsServerName,
				"port":      int64(443),
			},
		},
	}}
	if _, err := ms.dyn.Resource(apiServiceGVR).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating APIService %s: %w", MetricsAPIService, err)
	}
	return nil
}

// waitAvailable polls the APIService until its Available condition is
// True, metrics-server exits or ctx ends.
func (ms *MetricsServer) waitAvailable(ctx context.Context) error {
	tick := time.NewTicker(10 * pollInterval)
	defer tick.Stop()
	last := "not read yet"
	for {
		if err := ms.proc.exited(); err != nil {
			return err
		}
		got, err := ms.dyn.Resource(apiServiceGVR).Get(ctx, MetricsAPIService, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
		} else {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			last = "no Available condition"
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Available" {
					if m["status"] == "True" {
						return nil
					}
					last = fmt.Sprintf("Available=%v (%v: %v)", m["status"], m["reason"], m["message"])
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("APIService %s not Available (was the control plane started with Options.Aggregator?): %w; last: %s; end of %s:\n%s",
				MetricsAPIService, ctx.Err(), last, ms.proc.logPath, ms.proc.logTail(2048))
		case <-tick.C:
		}
	}
}

// Port is the port metrics-server serves on 127.0.0.1.
func (ms *MetricsServer) Port() int { return ms.port }

// LogTail returns up to n bytes from the end of metrics-server's log.
func (ms *MetricsServer) LogTail(n int64) string {
	if ms.proc == nil {
		return ""
	}
	return ms.proc.logTail(n)
}

// Stop unregisters the APIService, deletes the Service, EndpointSlice,
// RBAC and ServiceAccount, stops metrics-server (SIGTERM, then SIGKILL
// after a few seconds) and removes its files. Objects already gone are
// fine; it may be called more than once.
func (ms *MetricsServer) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	gone := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", what, err))
		}
	}
	c, del := ms.client, metav1.DeleteOptions{}
	// The APIService first, so the API server stops sending requests.
	gone("APIService "+MetricsAPIService, ms.dyn.Resource(apiServiceGVR).Delete(ctx, MetricsAPIService, del))
	if ms.proc != nil {
		if err := ms.proc.stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	gone("metrics-server's Service", c.CoreV1().Services(MetricsServerNamespace).Delete(ctx, MetricsServerName, del))
	gone("metrics-server's EndpointSlice", c.DiscoveryV1().EndpointSlices(MetricsServerNamespace).Delete(ctx, MetricsServerName, del))
	for _, name := range []string{ms.readRole(), ms.nodeMetricsRole(), ms.delegatorBinding()} {
		gone("ClusterRoleBinding "+name, c.RbacV1().ClusterRoleBindings().Delete(ctx, name, del))
	}
	for _, name := range []string{ms.readRole(), ms.nodeMetricsRole()} {
		gone("ClusterRole "+name, c.RbacV1().ClusterRoles().Delete(ctx, name, del))
	}
	gone("RoleBinding "+ms.authReaderBinding(), c.RbacV1().RoleBindings(MetricsServerNamespace).Delete(ctx, ms.authReaderBinding(), del))
	gone("metrics-server's ServiceAccount", c.CoreV1().ServiceAccounts(MetricsServerNamespace).Delete(ctx, MetricsServerName, del))
	if err := os.RemoveAll(ms.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
