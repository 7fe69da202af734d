package nodeapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// testCA is a certificate authority for client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client issues a client certificate for user in groups valid until
// notAfter.
func (ca *testCA) client(t testing.TB, user string, groups []string, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: t0.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// reviews answers TokenReviews from tokens and SubjectAccessReviews from
// grants ("user verb subresource"), counting the calls.
type reviews struct {
	mu      sync.Mutex
	tokens  map[string]authenticationv1.UserInfo
	tokenAu []string // audiences reviewed tokens are for; nil: the request's
	grants  map[string]bool
	fail    error
	// The next flakyTokens TokenReviews fail with a 500, the next
	// flakyAccess SubjectAccessReviews with a 429.
	flakyTokens, flakyAccess int
	tr, sar                  []string // the reviewed tokens, "user verb subresource" asked
	trSpecs                  []authenticationv1.TokenReviewSpec
	sarSpec                  []authorizationv1.SubjectAccessReviewSpec
}

func newReviews() *reviews {
	return &reviews{tokens: map[string]authenticationv1.UserInfo{}, grants: map[string]bool{}}
}

func (rv *reviews) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		rv.mu.Lock()
		defer rv.mu.Unlock()
		rv.tr = append(rv.tr, tr.Spec.Token)
		rv.trSpecs = append(rv.trSpecs, tr.Spec)
		if rv.fail != nil {
			return true, nil, rv.fail
		}
		if rv.flakyTokens > 0 {
			rv.flakyTokens--
			return true, nil, apierrors.NewInternalError(errors.New("etcd timeout"))
		}
		if u, ok := rv.tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u, Audiences: tr.Spec.Audiences}
			if rv.tokenAu != nil {
				tr.Status.Audiences = rv.tokenAu
			}
		} else {
			tr.Status.Error = "token not found"
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		rv.mu.Lock()
		defer rv.mu.Unlock()
		ra := sar.Spec.ResourceAttributes
		key := sar.Spec.User + " " + ra.Verb + " " + ra.Subresource
		rv.sar = append(rv.sar, key)
		rv.sarSpec = append(rv.sarSpec, sar.Spec)
		if rv.fail != nil {
			return true, nil, rv.fail
		}
		if rv.flakyAccess > 0 {
			rv.flakyAccess--
			return true, nil, apierrors.NewTooManyRequests("slow down", 1)
		}
		sar.Status.Allowed = rv.grants[key] && ra.Resource == "nodes" && ra.Name == "node-1" && ra.Version == "v1" && ra.Group == ""
		return true, sar, nil
	})
	return cs
}

func (rv *reviews) counts() (tokenReviews, accessReviews int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.tr), len(rv.sar)
}

// stubStats serves a fixed summary.
type stubStats struct{}

func (stubStats) Latest() *usage.Snapshot {
	return &usage.Snapshot{Time: t0, Summary: &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-1"}}}
}

// authFixture is an Auth in front of a Handler with stub stats and no
// pods, on a fake clock.
type authFixture struct {
	clk  *clocktesting.FakeClock
	rv   *reviews
	ca   *testCA
	auth *nodeapi.Auth
	h    http.Handler
}

func newAuthFixture(t testing.TB, mod func(*nodeapi.AuthOptions)) *authFixture {
	t.Helper()
	f := &authFixture{clk: clocktesting.NewFakeClock(t0), rv: newReviews(), ca: newTestCA(t, "client-ca")}
	cs := f.rv.clientset()
	opts := nodeapi.AuthOptions{
		NodeName:             "node-1",
		ClientCAs:            f.ca.pool(),
		TokenReviews:         cs.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(),
		Clock:                f.clk,
	}
	if mod != nil {
		mod(&opts)
	}
	var err error
	if f.auth, err = nodeapi.NewAuth(opts); err != nil {
		t.Fatal(err)
	}
	f.h = f.auth.Wrap(newHandler(t, nodeapi.Options{Stats: stubStats{}, PodLogRoot: t.TempDir()}))
	return f
}

// do serves method target with a bearer token (if not empty) and client
// certificate (if not nil).
func (f *authFixture) do(method, target, token string, cert *tls.Certificate) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if cert != nil {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert.Leaf}}
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func TestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, path, verb string
		subs               []string
	}{
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/stats/", "get", []string{"stats"}},
		{"GET", "/statsx", "get", []string{"proxy"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/metrics/cadvisor", "get", []string{"metrics"}},
		{"GET", "/metricsfoo", "get", []string{"proxy"}},
		{"GET", "/logs/", "get", []string{"log"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/ping", "get", []string{"healthz", "proxy"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/pods/", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/allocatedPods", "get", []string{"pods", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"POST", "/checkpoint/ns/pod/c", "create", []string{"checkpoint"}},
		{"GET", "/containerLogs/ns/pod/c", "get", []string{"proxy"}},
		{"POST", "/exec/ns/pod/c", "create", []string{"proxy"}},
		{"GET", "/exec/ns/pod/c", "get", []string{"proxy"}},
		{"GET", "/debug/pprof/heap", "get", []string{"proxy"}},
		{"POST", "/attach/ns/pod/c", "create", []string{"proxy"}},
		{"POST", "/portForward/ns/pod", "create", []string{"proxy"}},
		{"POST", "/run/ns/pod/c", "create", []string{"proxy"}},
		{"PUT", "/anything", "update", []string{"proxy"}},
		{"PATCH", "/anything", "patch", []string{"proxy"}},
		{"DELETE", "/anything", "delete", []string{"proxy"}},
		{"HEAD", "/healthz", "", []string{"healthz", "proxy"}},
		{"GET", "/", "get", []string{"proxy"}},
	} {
		verb, subs := nodeapi.Attributes(tc.method, tc.path)
		if verb != tc.verb || !slices.Equal(subs, tc.subs) {
			t.Errorf("%s %s: %q %q, want %q %q", tc.method, tc.path, verb, subs, tc.verb, tc.subs)
		}
	}
}

func TestAuthNoCredentials(t *testing.T) {
	f := newAuthFixture(t, nil)
	if w := f.do("GET", "/healthz", "", nil); w.Code != 401 || strings.TrimSpace(w.Body.String()) != "Unauthorized" {
		t.Fatalf("no credentials: %d %q, want 401 Unauthorized", w.Code, w.Body)
	}
	if tr, sar := f.rv.counts(); tr != 0 || sar != 0 {
		t.Fatalf("reviews %d, %d; want none", tr, sar)
	}

	// Anonymous on: system:anonymous, authorized like anyone else.
	f = newAuthFixture(t, func(o *nodeapi.AuthOptions) { o.Anonymous = true })
	if w := f.do("GET", "/healthz", "", nil); w.Code != 403 ||
		w.Body.String() != "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[healthz proxy])\n" {
		t.Fatalf("anonymous: %d %q", w.Code, w.Body)
	}
	if got := f.rv.sarSpec[0].Groups; !slices.Equal(got, []string{"system:unauthenticated"}) {
		t.Errorf("anonymous groups %q", got)
	}
	f.rv.grants["system:anonymous get healthz"] = true
	f.clk.Step(nodeapi.DefaultUnauthorizedCacheTTL)
	if w := f.do("GET", "/healthz", "", nil); w.Code != 200 {
		t.Fatalf("anonymous with nodes/healthz: %d %q", w.Code, w.Body)
	}
	// Wrong credentials are refused even with anonymous on.
	if w := f.do("GET", "/healthz", "nope", nil); w.Code != 401 {
		t.Fatalf("anonymous on, bad token: %d", w.Code)
	}
	other := newTestCA(t, "other").client(t, "mallory", nil, t0.Add(time.Hour))
	if w := f.do("GET", "/healthz", "", &other); w.Code != 401 {
		t.Fatalf("anonymous on, bad certificate: %d", w.Code)
	}
}

func TestAuthClientCertificates(t *testing.T) {
	f := newAuthFixture(t, nil)
	good := f.ca.client(t, "alice", []string{"ops", "dev"}, t0.Add(time.Hour))
	f.rv.grants["alice get stats"] = true
	if w := f.do("GET", "/stats/summary", "", &good); w.Code != 200 {
		t.Fatalf("good certificate: %d %q", w.Code, w.Body)
	}
	spec := f.rv.sarSpec[0]
	// O is a SET in the certificate: its order is DER's.
	if spec.User != "alice" || !slices.Equal(spec.Groups, []string{"dev", "ops", "system:authenticated"}) {
		t.Errorf("reviewed %q %q, want alice [dev ops system:authenticated]", spec.User, spec.Groups)
	}

	other := newTestCA(t, "other").client(t, "alice", []string{"ops"}, t0.Add(time.Hour))
	if w := f.do("GET", "/stats/summary", "", &other); w.Code != 401 {
		t.Fatalf("certificate of another CA: %d", w.Code)
	}
	f.clk.Step(2 * time.Hour)
	if w := f.do("GET", "/stats/summary", "", &good); w.Code != 401 {
		t.Fatalf("expired certificate: %d", w.Code)
	}
	// A bad certificate does not hide a good token.
	f.rv.tokens["tok"] = authenticationv1.UserInfo{Username: "alice"}
	if w := f.do("GET", "/stats/summary", "tok", &other); w.Code != 200 {
		t.Fatalf("bad certificate, good token: %d", w.Code)
	}
}

func TestAuthTokens(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.rv.tokens["good"] = authenticationv1.UserInfo{Username: "system:serviceaccount:ns:sa", UID: "u1", Groups: []string{"system:serviceaccounts"},
		Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"p"}}}
	if w := f.do("GET", "/stats/summary", "bad", nil); w.Code != 401 {
		t.Fatalf("rejected token: %d", w.Code)
	}
	if w := f.do("GET", "/stats/summary", "good", nil); w.Code != 403 {
		t.Fatalf("token without nodes/stats: %d", w.Code)
	}
	if len(f.rv.trSpecs[1].Audiences) != 0 {
		t.Errorf("audiences %q sent, want none (kubelet's default)", f.rv.trSpecs[1].Audiences)
	}
	spec := f.rv.sarSpec[0]
	if spec.UID != "u1" || spec.Extra["authentication.kubernetes.io/pod-name"][0] != "p" ||
		!slices.Equal(spec.Groups, []string{"system:serviceaccounts", "system:authenticated"}) {
		t.Errorf("reviewed %+v", spec)
	}

	// The WebSocket protocol carries a token too.
	f.rv.grants["system:serviceaccount:ns:sa get proxy"] = true
	r := httptest.NewRequest("GET", "/exec/ns/pod/c", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.Z29vZA")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != 503 { // authorized; the handler has no runtime to stream from
		t.Fatalf("websocket token: %d %q", w.Code, w.Body)
	}
}

func TestAuthAudiences(t *testing.T) {
	f := newAuthFixture(t, func(o *nodeapi.AuthOptions) { o.Audiences = []string{"kubelet"} })
	f.rv.tokens["vault"] = authenticationv1.UserInfo{Username: "bob"}
	f.rv.grants["bob get stats"] = true
	f.rv.tokenAu = []string{"vault"}
	if w := f.do("GET", "/stats/summary", "vault", nil); w.Code != 401 {
		t.Fatalf("token for another audience: %d", w.Code)
	}
	if got := f.rv.trSpecs[0].Audiences; !slices.Equal(got, []string{"kubelet"}) {
		t.Errorf("audiences sent %q, want [kubelet]", got)
	}
	f.rv.tokens["kubelet"] = authenticationv1.UserInfo{Username: "bob"}
	f.rv.tokenAu = []string{"api", "kubelet"}
	if w := f.do("GET", "/stats/summary", "kubelet", nil); w.Code != 200 {
		t.Fatalf("token for kubelet: %d", w.Code)
	}
}

func TestAuthForbidden(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.rv.tokens["stats"] = authenticationv1.UserInfo{Username: "metrics"}
	f.rv.grants["metrics get stats"] = true
	for _, tc := range []struct{ method, path, verb string }{
		{"GET", "/containerLogs/ns/pod/c", "get"},
		{"POST", "/exec/ns/pod/c?command=sh", "create"},
		{"GET", "/exec/ns/pod/c?command=sh", "get"},
		{"POST", "/attach/ns/pod/c", "create"},
		{"POST", "/portForward/ns/pod", "create"},
	} {
		w := f.do(tc.method, tc.path, "stats", nil)
		want := "Forbidden (user=metrics, verb=" + tc.verb + ", resource=nodes, subresource(s)=[proxy])\n"
		if w.Code != 403 || w.Body.String() != want {
			t.Errorf("%s %s: %d %q, want 403 %q", tc.method, tc.path, w.Code, w.Body, want)
		}
	}
	if w := f.do("GET", "/stats/summary", "stats", nil); w.Code != 200 || !strings.Contains(w.Body.String(), `"nodeName":"node-1"`) {
		t.Fatalf("/stats/summary with nodes/stats: %d %q", w.Code, w.Body)
	}
	// nodes/stats does not open /metrics/resource.
	if w := f.do("GET", "/metrics/resource", "stats", nil); w.Code != 403 {
		t.Fatalf("/metrics/resource with nodes/stats only: %d", w.Code)
	}
}

// /pods is allowed by nodes/pods, or failing that by nodes/proxy.
func TestAuthPodsFallsBackToProxy(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.rv.tokens["t"] = authenticationv1.UserInfo{Username: "u"}
	f.rv.grants["u get proxy"] = true
	if w := f.do("GET", "/pods", "t", nil); w.Code != 200 {
		t.Fatalf("/pods with nodes/proxy: %d", w.Code)
	}
	if want := []string{"u get pods", "u get proxy"}; !slices.Equal(f.rv.sar, want) {
		t.Fatalf("reviews %q, want %q", f.rv.sar, want)
	}
}

// A name that is not a DNS subdomain is still a 400 once authorized.
func TestAuthTraversal(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.rv.tokens["t"] = authenticationv1.UserInfo{Username: "u"}
	f.rv.grants["u get proxy"] = true
	for _, p := range []string{"/containerLogs/../web/app", "/containerLogs/ns/web/..%2F..%2Fetc", "/containerLogs/ns/%2e%2e/app"} {
		if w := f.do("GET", p, "t", nil); w.Code != 400 {
			t.Errorf("%s: %d, want 400", p, w.Code)
		}
	}
	if w := f.do("GET", "/containerLogs/../web/app", "", nil); w.Code != 401 {
		t.Errorf("unauthenticated traversal: %d, want 401", w.Code)
	}
}

func TestAuthCaches(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.rv.tokens["t"] = authenticationv1.UserInfo{Username: "u"}
	f.rv.grants["u get stats"] = true
	want := func(code, tr, sar int) {
		t.Helper()
		if w := f.do("GET", "/stats/summary", "t", nil); w.Code != code {
			t.Fatalf("%d, want %d", w.Code, code)
		}
		if gtr, gsar := f.rv.counts(); gtr != tr || gsar != sar {
			t.Fatalf("reviews: %d tokens, %d access; want %d, %d", gtr, gsar, tr, sar)
		}
	}
	want(200, 1, 1)
	f.clk.Step(nodeapi.DefaultAuthenticationCacheTTL - time.Second)
	want(200, 1, 1) // both cached
	f.clk.Step(time.Second)
	want(200, 2, 1) // token reviewed again; allowed decision still cached (5m)
	f.clk.Step(nodeapi.DefaultAuthorizedCacheTTL - nodeapi.DefaultAuthenticationCacheTTL)
	want(200, 3, 2) // 5m: both reviewed again

	// Denied decisions are cached for 30s.
	f.rv.grants["u get stats"] = false
	f.clk.Step(nodeapi.DefaultAuthorizedCacheTTL)
	want(403, 4, 3)
	f.rv.grants["u get stats"] = true
	f.clk.Step(nodeapi.DefaultUnauthorizedCacheTTL - time.Second)
	want(403, 4, 3)
	f.clk.Step(time.Second)
	want(200, 4, 4)

	// Rejected tokens are cached too (2m), as kubelet's cache does.
	f.do("GET", "/stats/summary", "unknown", nil)
	f.do("GET", "/stats/summary", "unknown", nil)
	if tr, _ := f.rv.counts(); tr != 5 {
		t.Fatalf("rejected token reviewed %d times in all, want 5", tr)
	}
}

func TestAuthReviewErrors(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.rv.tokens["t"] = authenticationv1.UserInfo{Username: "u"}
	f.rv.grants["u get stats"] = true
	f.rv.fail = errors.New("apiserver down")
	if w := f.do("GET", "/stats/summary", "t", nil); w.Code != 401 {
		t.Fatalf("TokenReview failing: %d, want 401", w.Code)
	}
	cert := f.ca.client(t, "u", nil, t0.Add(time.Hour))
	if w := f.do("GET", "/stats/summary", "", &cert); w.Code != 500 ||
		w.Body.String() != "Authorization error (user=u, verb=get, resource=nodes, subresource=stats)\n" {
		t.Fatalf("SubjectAccessReview failing: %d %q", w.Code, w.Body)
	}
	// Errors are not cached.
	f.rv.fail = nil
	if w := f.do("GET", "/stats/summary", "t", nil); w.Code != 200 {
		t.Fatalf("after recovery: %d", w.Code)
	}
}

func TestAuthAlwaysAllow(t *testing.T) {
	f := newAuthFixture(t, func(o *nodeapi.AuthOptions) { o.SubjectAccessReviews = nil; o.AlwaysAllow = true })
	cert := f.ca.client(t, "u", nil, t0.Add(time.Hour))
	if w := f.do("GET", "/stats/summary", "", &cert); w.Code != 200 {
		t.Fatalf("AlwaysAllow: %d", w.Code)
	}
	if w := f.do("GET", "/stats/summary", "", nil); w.Code != 401 {
		t.Fatalf("AlwaysAllow without credentials: %d", w.Code)
	}
}

func TestAuthOptionsValidation(t *testing.T) {
	cs := fake.NewClientset()
	sar := cs.AuthorizationV1().SubjectAccessReviews()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, newTestCA(t, "ca").pem, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]nodeapi.AuthOptions{
		"no node":           {Anonymous: true, AlwaysAllow: true},
		"no authentication": {NodeName: "n", SubjectAccessReviews: sar},
		"no authorization":  {NodeName: "n", Anonymous: true},
		"both":              {NodeName: "n", Anonymous: true, AlwaysAllow: true, SubjectAccessReviews: sar},
		"both CAs":          {NodeName: "n", ClientCAFile: caFile, ClientCAs: x509.NewCertPool(), AlwaysAllow: true},
		"missing CA file":   {NodeName: "n", ClientCAFile: caFile + ".missing", AlwaysAllow: true},
		"long TTL":          {NodeName: "n", Anonymous: true, AlwaysAllow: true, AuthorizedCacheTTL: 2 * time.Hour},
		"short timeout":     {NodeName: "n", Anonymous: true, AlwaysAllow: true, ReviewTimeout: time.Millisecond},
		"cache size":        {NodeName: "n", Anonymous: true, AlwaysAllow: true, CacheSize: -1},
	} {
		if _, err := nodeapi.NewAuth(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := nodeapi.NewAuth(nodeapi.AuthOptions{NodeName: "n", ClientCAFile: caFile, SubjectAccessReviews: sar}); err != nil {
		t.Errorf("valid options: %v", err)
	}
	for _, tc := range []struct {
		o    nodeapi.AuthOptions
		want string
	}{
		{nodeapi.AuthOptions{AuthorizedCacheTTL: 2 * time.Hour}, "nodeapi: AuthOptions.AuthorizedCacheTTL 2h0m0s must be at most 1h0m0s"},
		{nodeapi.AuthOptions{CacheSize: -1}, "nodeapi: AuthOptions.CacheSize -1 must be at least 1"},
		{nodeapi.AuthOptions{ReviewRetries: 11}, "nodeapi: AuthOptions.ReviewRetries 11 must be at most 10"},
	} {
		tc.o.NodeName, tc.o.Anonymous, tc.o.AlwaysAllow = "n", true, true
		if _, err := nodeapi.NewAuth(tc.o); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func TestAuthUpgradeRequiresCreate(t *testing.T) {
	upgrade := func(f *authFixture, path string) int {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer t")
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Upgrade", "websocket")
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		return w.Code
	}
	for _, on := range []bool{false, true} {
		f := newAuthFixture(t, func(o *nodeapi.AuthOptions) { o.UpgradeRequiresCreate = on })
		f.rv.tokens["t"] = authenticationv1.UserInfo{Username: "u"}
		f.rv.grants["u get proxy"] = true
		// The handler has no runtime to stream from: 503 is authorized.
		want := 503
		if on {
			want = 403
		}
		for _, p := range []string{"/exec/ns/pod/c?command=sh", "/attach/ns/pod/c", "/portForward/ns/pod"} {
			if got := upgrade(f, p); got != want {
				t.Errorf("UpgradeRequiresCreate %v, upgrade %s with get on nodes/proxy: %d, want %d", on, p, got, want)
			}
		}
		// Other paths and plain GETs keep get.
		if got := upgrade(f, "/containerLogs/ns/pod/c"); got != 404 {
			t.Errorf("UpgradeRequiresCreate %v, upgrade of /containerLogs: %d, want the handler's 404 (no such pod)", on, got)
		}
		if got := f.do("GET", "/exec/ns/pod/c", "t", nil).Code; got != 503 {
			t.Errorf("UpgradeRequiresCreate %v, plain GET /exec: %d, want the handler's 503", on, got)
		}
		if on {
			f.rv.grants["u create proxy"] = true
			f.clk.Step(nodeapi.DefaultUnauthorizedCacheTTL)
			if got := upgrade(f, "/exec/ns/pod/c"); got != 503 {
				t.Errorf("upgrade with create on nodes/proxy: %d, want the handler's 503", got)
			}
		}
	}
}

// Reviews failing with a transient error are retried after 500ms, 750ms,
// … on the clock; 4 retries at most.
func TestAuthReviewRetries(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.rv.tokens["t"] = authenticationv1.UserInfo{Username: "u"}
	f.rv.grants["u get stats"] = true
	serve := func() chan int {
		done := make(chan int, 1)
		go func() { done <- f.do("GET", "/stats/summary", "t", nil).Code }()
		return done
	}
	// step waits for the request to wait for a retry, then moves the clock.
	step := func(d time.Duration) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "the request to wait for a retry", f.clk.HasWaiters)
		f.clk.Step(d)
	}
	f.rv.mu.Lock()
	f.rv.flakyTokens, f.rv.flakyAccess = 2, 1
	f.rv.mu.Unlock()
	done := serve()
	step(500 * time.Millisecond)
	step(750 * time.Millisecond)
	step(500 * time.Millisecond) // the access review's first retry
	if code := <-done; code != 200 {
		tr, sar := f.rv.counts()
		t.Fatalf("after transient failures: %d, want 200 (reviews %d, %d)", code, tr, sar)
	}
	if tr, sar := f.rv.counts(); tr != 3 || sar != 2 {
		t.Fatalf("reviews %d, %d; want 3, 2", tr, sar)
	}

	// Five failures in a row: the request fails.
	f.clk.Step(nodeapi.DefaultAuthorizedCacheTTL)
	f.rv.mu.Lock()
	f.rv.flakyTokens = 5
	f.rv.mu.Unlock()
	done = serve()
	for _, d := range []time.Duration{500 * time.Millisecond, 750 * time.Millisecond, 1125 * time.Millisecond, 1687500 * time.Microsecond} {
		step(d)
	}
	if code := <-done; code != 401 {
		t.Fatalf("after 5 failed token reviews: %d, want 401", code)
	}
	if tr, _ := f.rv.counts(); tr != 8 {
		t.Fatalf("%d token reviews in all, want 8", tr)
	}
}

// One Auth serving several nodes checks each request against its own node,
// and answers 404 before any review for an address with no node.
func TestAuthNodeNameFrom(t *testing.T) {
	f := newAuthFixture(t, func(o *nodeapi.AuthOptions) {
		o.NodeName = ""
		o.NodeNameFrom = func(r *http.Request) (string, bool) {
			node, ok := strings.CutSuffix(r.Host, ".test")
			return node, ok
		}
	})
	f.rv.tokens["stats"] = authenticationv1.UserInfo{Username: "metrics"}
	f.rv.grants["metrics get stats"] = true // on node-1 only
	do := func(host string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "https://"+host+"/stats/summary", nil)
		r.Header.Set("Authorization", "Bearer stats")
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		return w
	}
	if w := do("elsewhere:10250"); w.Code != 404 || w.Body.String() != "no node at this address\n" {
		t.Fatalf("no node: %d %q", w.Code, w.Body)
	}
	if tr, sar := f.rv.counts(); tr != 0 || sar != 0 {
		t.Fatalf("reviews for a request to no node: %d token, %d access", tr, sar)
	}
	if w := do("node-1.test"); w.Code != 200 {
		t.Fatalf("node-1: %d %q", w.Code, w.Body)
	}
	// node-1's cached decision does not let the same user into node-2.
	if w := do("node-2.test"); w.Code != 403 {
		t.Fatalf("node-2: %d %q", w.Code, w.Body)
	}
	var names []string
	for _, s := range f.rv.sarSpec {
		names = append(names, s.ResourceAttributes.Name)
	}
	if !slices.Equal(names, []string{"node-1", "node-2"}) {
		t.Errorf("reviewed nodes %v, want [node-1 node-2]", names)
	}
	// Outside Wrap there is no node to ask about.
	if _, err := f.auth.Authorize(context.Background(), &nodeapi.User{Name: "metrics"}, "get", "stats"); err == nil {
		t.Error("Authorize without a node name: no error")
	}
	if _, err := nodeapi.NewAuth(nodeapi.AuthOptions{AlwaysAllow: true, Anonymous: true}); err == nil || !strings.Contains(err.Error(), "NodeName") {
		t.Errorf("neither NodeName nor NodeNameFrom: %v", err)
	}
}
