package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
)

// testIssuer is a CA for the agent's serving certificate or its clients.
type testIssuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newIssuer(t *testing.T, name string) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testIssuer{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for cn (a server's for 127.0.0.1, or a
// client's) and returns it and its key in PEM.
func (is *testIssuer) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, &key.PublicKey, is.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// swapFile writes data beside path and renames it over path.
func swapFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// The agent serves the --tls-cert-file/--tls-private-key-file pair on disk
// and trusts the --client-ca-file bundle on disk: replaced while it runs,
// they take effect without a restart, as kubelet's do.
func TestAgentNodeAPIReloadsCertificates(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	servingA, servingB := newIssuer(t, "serving-a"), newIssuer(t, "serving-b")
	clientsA, clientsB := newIssuer(t, "clients-a"), newIssuer(t, "clients-b")
	c, k := servingA.issue(t, "node", x509.ExtKeyUsageServerAuth)
	swapFile(t, certFile, c)
	swapFile(t, keyFile, k)
	swapFile(t, caFile, clientsA.pem)
	_, p, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	startStandalone(t, "e2e-certreload", "--port="+p, "--address=127.0.0.1", "--root-dir="+t.TempDir(),
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile, "--client-ca-file="+caFile)
	port, _ := strconv.Atoi(p)
	url := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz"

	// get GETs /healthz trusting only roots' CA and presenting a client
	// certificate of clients, on a new connection; it returns the status,
	// or 0 when the TLS handshake failed (the server's certificate is not
	// roots').
	get := func(roots, clients *testIssuer) int {
		t.Helper()
		pool := x509.NewCertPool()
		pool.AddCert(roots.cert)
		certPEM, keyPEM := clients.issue(t, "someone", x509.ExtKeyUsageClientAuth)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the node API serving", func() bool {
		return get(servingA, clientsA) == http.StatusOK
	})
	if got := get(servingA, clientsB); got != http.StatusUnauthorized {
		t.Errorf("a client of a CA not in --client-ca-file: %d, want 401", got)
	}

	c, k = servingB.issue(t, "node", x509.ExtKeyUsageServerAuth)
	swapFile(t, keyFile, k)
	swapFile(t, certFile, c)
	swapFile(t, caFile, clientsB.pem)
	if got := get(servingB, clientsB); got != http.StatusOK {
		t.Errorf("after replacing the files, the new serving certificate and client CA: %d, want 200", got)
	}
	if got := get(servingA, clientsB); got != 0 {
		t.Errorf("after replacing the files, a client trusting only the old serving CA: %d, want a failed handshake", got)
	}
	if got := get(servingB, clientsA); got != http.StatusUnauthorized {
		t.Errorf("after replacing the files, a client of the removed CA: %d, want 401", got)
	}
}
