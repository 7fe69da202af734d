// Package controlplane starts a real kube-apiserver and etcd for tests, through
// controller-runtime's envtest, with the Node authorizer and the
// NodeRestriction admission plugin on, so that an agent can run with the
// identity a real kubelet has (system:node:<name> in group system:nodes).
//
// The binaries are built from the Go module proxy by hack/testbin.sh into a
// cache outside the source tree (make testbin). They are found through
// KUBEBUILDER_ASSETS, or else in the cache directory that the script's inputs
// name.
package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ErrUnavailable is wrapped by Start's error when the binaries are missing.
var ErrUnavailable = errors.New("control plane binaries not available")

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	env     *envtest.Environment
	admin   *rest.Config
	certDir string

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

// Start starts etcd and kube-apiserver and waits until they serve.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	dir := opts.AssetsDir
	if dir == "" {
		var err error
		if dir, err = BinaryDir(); err != nil {
			return nil, err
		}
	}
	certDir, err := os.MkdirTemp("", "nodekit-apiserver-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := env.ControlPlane.GetAPIServer()
	// A certificate directory of our own survives StopAPIServer, so a restart
	// serves the same certificates and trusts the same client CA.
	api.CertDir = certDir
	args := api.Configure()
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	for k, v := range opts.ExtraAPIServerArgs {
		args.Set(k, v)
	}
	admin, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	cp := &ControlPlane{env: env, admin: admin, certDir: certDir, nodes: map[string]*rest.Config{}}
	if err := cp.ensureNamespace(ctx, corev1.NamespaceNodeLease); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := cp.AdminClient().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// Stop stops kube-apiserver and etcd and removes their files.
func (cp *ControlPlane) Stop() error {
	err := cp.env.Stop()
	_ = os.RemoveAll(cp.certDir)
	return err
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
	user, err := cp.env.AddUser(envtest.User{Name: "system:node:" + name, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding node identity %s: %w", name, err)
	}
	cfg := user.Config()
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

// StopAPIServer stops kube-apiserver and leaves etcd running. StartAPIServer
// brings it back on the same address with the same certificates.
func (cp *ControlPlane) StopAPIServer() error {
	return cp.env.ControlPlane.GetAPIServer().Stop()
}

// StartAPIServer starts kube-apiserver again after StopAPIServer and waits
// until it is healthy.
func (cp *ControlPlane) StartAPIServer() error {
	return cp.env.ControlPlane.GetAPIServer().Start()
}

// Host returns the API server's URL.
func (cp *ControlPlane) Host() string { return cp.admin.Host }

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
