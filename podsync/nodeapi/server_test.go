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
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// runServer serves opts on 127.0.0.1:0 until the test ends and returns
// its address; the server must have stopped by then.
func runServer(t *testing.T, opts nodeapi.ServerOptions) (*nodeapi.Server, string) {
	t.Helper()
	s, err := nodeapi.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, "https://" + ln.Addr().String()
}

// tlsClient trusts roots and presents cert (if not nil).
func tlsClient(roots *x509.CertPool, cert *tls.Certificate, maxVersion uint16) *http.Client {
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", MaxVersion: maxVersion}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
}

func getStatus(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	code, _ := getBody(t, c, url, token)
	return code
}

// getBody GETs url with a bearer token (if not empty).
func getBody(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerSelfSigned(t *testing.T) {
	f := newAuthFixture(t, nil)
	t.Cleanup(leakcheck.Check(t)) // after the server's cleanup, registered later
	f.rv.grants["alice get stats"] = true
	f.rv.tokens["tok"] = authenticationv1.UserInfo{Username: "alice"}
	cs := f.rv.clientset()
	s, addr := runServer(t, nodeapi.ServerOptions{
		Handler: newHandler(t, nodeapi.Options{Stats: stubStats{}}),
		Auth: nodeapi.AuthOptions{NodeName: "node-1", ClientCAs: f.ca.pool(),
			TokenReviews: cs.AuthenticationV1().TokenReviews(), SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews()},
		Hostnames: []string{"localhost"},
		IPs:       []net.IP{net.IPv4(127, 0, 0, 1)},
		Clock:     f.clk,
	})
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())

	good := f.ca.client(t, "alice", nil, t0.Add(time.Hour))
	bad := newTestCA(t, "other").client(t, "alice", nil, t0.Add(time.Hour))
	for _, tc := range []struct {
		name  string
		cert  *tls.Certificate
		token string
		want  int
	}{
		{"client certificate", &good, "", 200},
		{"same connection again", &good, "", 200},
		{"certificate of another CA", &bad, "", 401},
		{"no credentials", nil, "", 401},
		{"token", nil, "tok", 200},
		{"unknown token", nil, "nope", 401},
	} {
		c := tlsClient(roots, tc.cert, 0)
		if tc.name == "same connection again" {
			getStatus(t, c, addr+"/stats/summary", tc.token)
		}
		if got := getStatus(t, c, addr+"/stats/summary", tc.token); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
		c.CloseIdleConnections()
	}
	// alice by certificate and by token is the same user: one review.
	if _, sar := f.rv.counts(); sar != 1 {
		t.Errorf("%d access reviews, want 1 (the rest cached)", sar)
	}

	// TLS 1.1 is refused.
	c := tlsClient(roots, nil, tls.VersionTLS11)
	if _, err := c.Get(addr + "/healthz"); err == nil {
		t.Error("TLS 1.1 accepted")
	}
	c.CloseIdleConnections()
}

func TestServerCertFiles(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "node-1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)

	s, addr := runServer(t, nodeapi.ServerOptions{
		Handler:  http.NotFoundHandler(),
		Auth:     nodeapi.AuthOptions{NodeName: "node-1", Anonymous: true, AlwaysAllow: true},
		CertFile: certFile, KeyFile: keyFile,
	})
	if s.Certificate().Subject.CommonName != "node-1" {
		t.Fatalf("serving %v", s.Certificate().Subject)
	}
	leaf, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	c := tlsClient(roots, nil, 0)
	if got := getStatus(t, c, addr+"/x", ""); got != 404 {
		t.Fatalf("anonymous, AlwaysAllow: %d, want the handler's 404", got)
	}
	c.CloseIdleConnections()

	if _, err := nodeapi.NewServer(nodeapi.ServerOptions{Handler: http.NotFoundHandler(), CertFile: certFile,
		Auth: nodeapi.AuthOptions{NodeName: "n", Anonymous: true, AlwaysAllow: true}}); err == nil {
		t.Error("CertFile without KeyFile accepted")
	}
	if _, err := nodeapi.NewServer(nodeapi.ServerOptions{Auth: nodeapi.AuthOptions{NodeName: "n", Anonymous: true, AlwaysAllow: true}}); err == nil {
		t.Error("no Handler accepted")
	}
}

func TestServerListenError(t *testing.T) {
	s, err := nodeapi.NewServer(nodeapi.ServerOptions{Handler: http.NotFoundHandler(), Hostnames: []string{"localhost"}, IPs: []net.IP{},
		Auth: nodeapi.AuthOptions{NodeName: "n", Anonymous: true, AlwaysAllow: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ListenAndServe(context.Background(), "256.0.0.1:1"); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("ListenAndServe on a bad address: %v", err)
	}
}

// With a CertDir the self-signed pair is written once and served again
// after a restart.
func TestServerCertDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	opts := nodeapi.ServerOptions{Handler: http.NotFoundHandler(), CertDir: dir, Hostnames: []string{"node-1"}, IPs: []net.IP{},
		Auth: nodeapi.AuthOptions{NodeName: "node-1", Anonymous: true, AlwaysAllow: true}}
	first, err := nodeapi.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "kubelet.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubelet.key: %v %v", st, err)
	}
	second, err := nodeapi.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Certificate().Equal(second.Certificate()) {
		t.Fatal("a restart made a new certificate")
	}
	if got := first.Certificate().DNSNames; len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("DNS names %q", got)
	}
}
