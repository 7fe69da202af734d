package nodeapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

var cp *controlplane.ControlPlane

// ctrd is the real containerd of the streaming end-to-end tests.
var ctrd *containerdtest.Containerd

func TestMain(m *testing.M) {
	os.Exit(containerdtest.MainFunc(func() int { return controlplane.Main(m, &cp) }, &ctrd))
}

// The server in front of a real kube-apiserver: its TokenReviews and
// SubjectAccessReviews made as the node (system:node:node-1), as a
// kubelet makes them, and RBAC deciding.
func TestIntegrationAuth(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx := context.Background()
	admin := cp.AdminClient()
	nodeClient, err := cp.NodeClient("node-1")
	if err != nil {
		t.Fatal(err)
	}
	const ns = "nodeapi-auth"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(audiences ...string) string {
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	saToken, vaultToken := token(), token("vault")

	adminCfg := cp.AdminConfig()
	adminCert, err := tls.X509KeyPair(adminCfg.CertData, adminCfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(adminCfg.CAData)

	tokenReviews := nodeClient.AuthenticationV1().TokenReviews()
	accessReviews := nodeClient.AuthorizationV1().SubjectAccessReviews()
	// The node's connection to the API server is open before the leak
	// check's snapshot.
	if _, err := accessReviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "warm-up", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("SubjectAccessReview as the node: %v", err)
	}

	t.Cleanup(leakcheck.Check(t))
	clk := clocktesting.NewFakeClock(time.Now())
	s, addr := runServer(t, nodeapi.ServerOptions{
		Handler: newHandler(t, nodeapi.Options{Stats: stubStats{}, PodLogRoot: t.TempDir()}),
		Auth: nodeapi.AuthOptions{NodeName: "node-1", ClientCAs: clientCAs,
			TokenReviews: tokenReviews, SubjectAccessReviews: accessReviews},
		Hostnames: []string{"localhost"},
		IPs:       []net.IP{net.IPv4(127, 0, 0, 1)},
		Clock:     clk,
	})
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	asAdmin, anyone := tlsClient(roots, &adminCert, 0), tlsClient(roots, nil, 0)
	defer asAdmin.CloseIdleConnections()
	defer anyone.CloseIdleConnections()

	if got := getStatus(t, asAdmin, addr+"/stats/summary", ""); got != 200 {
		t.Errorf("admin client certificate: %d, want 200", got)
	}
	if got := getStatus(t, asAdmin, addr+"/containerLogs/../etc/passwd", ""); got != 400 {
		t.Errorf("admin, traversal in /containerLogs: %d, want 400", got)
	}
	if got := getStatus(t, anyone, addr+"/stats/summary", ""); got != 401 {
		t.Errorf("no credentials: %d, want 401", got)
	}
	if got := getStatus(t, anyone, addr+"/stats/summary", vaultToken); got != 401 {
		t.Errorf("token for audience vault: %d, want 401", got)
	}
	if got := getStatus(t, anyone, addr+"/stats/summary", saToken); got != 403 {
		t.Errorf("ServiceAccount without RBAC: %d, want 403", got)
	}

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodeapi-stats"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"nodes/stats"}, ResourceNames: []string{"node-1"}, Verbs: []string{"get"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodeapi-stats"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nodeapi-stats"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "reader"}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	}()
	// The denial is cached for 30s; RBAC takes a moment to see the
	// binding, so each try moves past the denied TTL.
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for got != 200 && time.Now().Before(deadline) {
		clk.Step(nodeapi.DefaultUnauthorizedCacheTTL)
		got = getStatus(t, anyone, addr+"/stats/summary", saToken)
	}
	if got != 200 {
		t.Errorf("ServiceAccount with nodes/stats: %d, want 200", got)
	}
	// nodes/stats is not nodes/proxy.
	code, body := getBody(t, anyone, addr+"/containerLogs/"+ns+"/p/c", saToken)
	if want := "Forbidden (user=system:serviceaccount:" + ns + ":reader, verb=get, resource=nodes, subresource(s)=[proxy])\n"; code != 403 || body != want {
		t.Errorf("ServiceAccount, /containerLogs: %d %q, want 403 %q", code, body, want)
	}
}
