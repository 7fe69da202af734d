package volume

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

// ctrd is the end-to-end tests' containerd and cp the integration tests'
// control plane; nil in -short mode or when unavailable (the tests skip).
var (
	ctrd *containerdtest.Containerd
	cp   *controlplane.ControlPlane
)

func TestMain(m *testing.M) {
	os.Exit(containerdtest.MainFunc(func() int { return controlplane.Main(m, &cp) }, &ctrd))
}

// apiNode is a Node registered by itself on the test control plane, with a
// counted node client and an admin client.
type apiNode struct {
	name       string
	transports *[]http.RoundTripper
	admin      kubernetes.Interface
	node       kubernetes.Interface
	count      *testenv.APICounter
}

func newAPINode(t *testing.T, name string) *apiNode {
	t.Helper()
	cp := controlplane.Need(t, cp)
	var transports []http.RoundTripper
	t.Cleanup(func() {
		for _, rt := range transports {
			utilnet.CloseIdleConnectionsFor(rt)
		}
	})
	n := &apiNode{name: name, count: &testenv.APICounter{}, transports: &transports}
	adminCfg := cp.AdminConfig()
	adminCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { transports = append(transports, rt); return rt }
	var err error
	if n.admin, err = kubernetes.NewForConfig(adminCfg); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		transports = append(transports, rt)
		return n.count.Wrap(rt)
	}
	if n.node, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) })
	return n
}

// closeIdle closes the clients' idle connections (before a leak check).
func (n *apiNode) closeIdle() {
	for _, rt := range *n.transports {
		utilnet.CloseIdleConnectionsFor(rt)
	}
}

// create makes objects as an admin, deleting them at the end; an object
// that exists already is kept.
func create[T any](t *testing.T, fn func(context.Context, T, metav1.CreateOptions) (T, error), del func(context.Context, string, metav1.DeleteOptions) error, name string, obj T) {
	t.Helper()
	if _, err := fn(context.Background(), obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = del(context.Background(), name, metav1.DeleteOptions{}) })
}

// apiObjects creates, in namespace ns, the ServiceAccount, the Secret, the
// ConfigMap and kube-root-ca.crt the pods of these tests use (no
// controller manager runs to make the last one).
func apiObjects(t *testing.T, admin kubernetes.Interface, ns, prefix string) {
	t.Helper()
	c := admin.CoreV1()
	create(t, c.ServiceAccounts(ns).Create, c.ServiceAccounts(ns).Delete, "app", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}})
	create(t, c.ConfigMaps(ns).Create, c.ConfigMaps(ns).Delete, "kube-root-ca.crt", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "test CA\n"}})
	create(t, c.Secrets(ns).Create, c.Secrets(ns).Delete, prefix+"-secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-secret"}, Data: map[string][]byte{"user": []byte("admin")}})
	create(t, c.ConfigMaps(ns).Create, c.ConfigMaps(ns).Delete, prefix+"-config", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-config"}, Data: map[string]string{"greeting": "hello"}})
}

// apiPod is a pod bound to node that uses the Secret, the ConfigMap and
// the projected volume the ServiceAccount admission plugin would add (the
// test API server runs without that plugin).
func apiPod(name, node, prefix string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "app",
			Volumes: []corev1.Volume{secretVol("secret", prefix+"-secret"), configMapVol("config", prefix+"-config"), kubeAPIAccess(ptr(int64(3600)), "")},
			Containers: []corev1.Container{{Name: "app", Image: "busybox",
				Env: []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: prefix + "-config"}, Key: "greeting"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/s"}, {Name: "config", MountPath: "/c"}}}}}}
}

// As system:node:<name> under the Node authorizer and NodeRestriction: a
// pod of this node reads its Secret, ConfigMap and a token bound to it
// (checked with a TokenReview); another node's pod's Secret is forbidden
// and reported as FailedMount. The API requests and bytes of one pod are
// logged for BENCHMARKS.md.
func TestIntegrationNodeReads(t *testing.T) {
	n := newAPINode(t, "volume-n1")
	other := newAPINode(t, "volume-n2")
	apiObjects(t, n.admin, "default", "int")
	ctx := context.Background()
	pods := n.admin.CoreV1().Pods("default")
	mine, err := pods.Create(ctx, apiPod("mine", n.name, "int"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	theirsSpec := apiPod("theirs", other.name, "int")
	theirsSpec.Spec.Volumes[0].Secret.SecretName = "theirs-only"
	create(t, n.admin.CoreV1().Secrets("default").Create, n.admin.CoreV1().Secrets("default").Delete, "theirs-only",
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "theirs-only"}, Data: map[string][]byte{"k": []byte("v")}})
	theirs, err := pods.Create(ctx, theirsSpec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(ctx, "mine", metav1.DeleteOptions{GracePeriodSeconds: &zero})
		_ = pods.Delete(ctx, "theirs", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})

	snap := leakcheck.Take()
	rec := record.NewFakeRecorder(100)
	m, err := New(withAPI(Options{Recorder: rec}, n.node.CoreV1()))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		n.closeIdle()
		snap.Verify(t)
	}()
	root := t.TempDir()
	defer func() { _ = unmountAll(root) }()
	before := n.count.Count()
	start := time.Now()
	dir := filepath.Join(root, string(mine.UID))
	if err := m.SetUpPod(ctx, mine, dir); err != nil {
		t.Fatal(err)
	}
	setUp := time.Since(start)
	read := func(vol, plugin, file string) string {
		b, err := os.ReadFile(filepath.Join(dir, "volumes", plugin, vol, file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read("secret", PluginSecret, "user") + " " + read("config", PluginConfigMap, "greeting"); got != "admin hello" {
		t.Errorf("secret and configMap: %q", got)
	}
	if v, ok, err := m.EnvValue(ctx, mine, &mine.Spec.Containers[0], mine.Spec.Containers[0].Env[0].ValueFrom); v != "hello" || !ok || err != nil {
		t.Errorf("env from the ConfigMap: %q %v %v", v, ok, err)
	}
	tokenVol := mine.Spec.Volumes[2].Name
	token := read(tokenVol, PluginProjected, "token")
	if read(tokenVol, PluginProjected, "ca.crt") != "test CA\n" || read(tokenVol, PluginProjected, "namespace") != "default" {
		t.Error("kube-root-ca.crt or namespace missing from the projected volume")
	}
	tr, err := n.admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:default:app" ||
		strings.Join(tr.Status.User.Extra["authentication.kubernetes.io/pod-uid"], "") != string(mine.UID) {
		t.Errorf("token review: %+v", tr.Status)
	}
	sent := n.count.Count().Sub(before)
	calls := sent.Calls()
	t.Logf("one pod (Secret, ConfigMap, projected token, kube-root-ca.crt) set up in %v: %d requests, %d request bytes, %d response bytes so far: %v",
		setUp, sent.Requests, sent.RequestBytes, sent.ResponseBytes, calls)
	if calls["POST serviceaccounts/token"] != 1 || calls["GET secrets"] != 1 || calls["GET configmaps"] != 2 || calls["WATCH secrets"] > 1 || calls["WATCH configmaps"] > 2 {
		t.Errorf("requests %v: want one token request and one list and at most one watch per object", calls)
	}

	// Another node's pod: its Secret is forbidden to this node.
	tdir := filepath.Join(root, string(theirs.UID))
	err = m.SetUpPod(ctx, theirs, tdir)
	if !errors.Is(err, ErrMount) || !strings.Contains(err.Error(), `secrets "theirs-only" is forbidden: User "system:node:volume-n1"`) {
		t.Errorf("another node's Secret: %v", err)
	}
	found := false
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, "FailedMount") && strings.Contains(e, "forbidden") {
			found = true
		}
	}
	if !found {
		t.Error("no FailedMount event for the forbidden Secret")
	}
	for _, p := range []struct {
		pod *corev1.Pod
		dir string
	}{{mine, dir}, {theirs, tdir}} {
		if err := m.TearDownPod(ctx, p.pod, p.dir); err != nil {
			t.Error(err)
		}
	}
	if m.Watches() != 0 {
		t.Errorf("%d watches after tear-down", m.Watches())
	}
}
