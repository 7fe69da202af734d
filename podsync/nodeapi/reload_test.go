package nodeapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// replaceFile writes data next to path and renames it over path, as
// certificate tools and Secret volumes replace files.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servingPair is a self-signed serving certificate for localhost named cn,
// and its key, in PEM.
func servingPair(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: cn},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour), DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// A server given CertFile and KeyFile serves the pair on disk at each
// handshake: a new pair once both files are replaced, the last good pair
// while they do not match or do not parse. A server given ClientCAFile
// trusts the bundle on disk: a client of a new CA is let in once the file
// holds it, on a new connection (the handshake names the new CA, so a
// client picks its certificate) and on one kept open (verified again).
func TestServerReloads(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	certA, keyA := servingPair(t, "a")
	replaceFile(t, certFile, certA)
	replaceFile(t, keyFile, keyA)
	oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	replaceFile(t, caFile, oldCA.pem)

	clk := clocktesting.NewFakeClock(t0)
	s, addr := runServer(t, nodeapi.ServerOptions{
		Handler:  http.NotFoundHandler(),
		Auth:     nodeapi.AuthOptions{NodeName: "node-1", ClientCAFile: caFile, AlwaysAllow: true, Clock: clk},
		CertFile: certFile, KeyFile: keyFile, Clock: clk,
	})
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", addr[len("https://"):], &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the served certificate
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "a" {
		t.Fatalf("serving %q, want a", got)
	}
	certB, keyB := servingPair(t, "b")
	replaceFile(t, certFile, certB)
	if got := served(); got != "a" {
		t.Errorf("the new certificate with the old key: serving %q, want the last good pair a", got)
	}
	replaceFile(t, keyFile, keyB)
	if got := served(); got != "b" {
		t.Errorf("both files replaced: serving %q, want b", got)
	}
	if got := s.Certificate().Subject.CommonName; got != "b" {
		t.Errorf("Certificate() %q, want b", got)
	}
	replaceFile(t, certFile, []byte("not PEM"))
	if got := served(); got != "b" {
		t.Errorf("a broken certificate file: serving %q, want the last good pair b", got)
	}

	// The client CA bundle.
	alice := newCA.client(t, "alice", nil, t0.Add(time.Hour))
	fresh := func() int {
		t.Helper()
		c := tlsClient(nil, &alice, 0)
		c.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
		defer c.CloseIdleConnections()
		return getStatus(t, c, addr+"/x", "")
	}
	// kept presents alice's certificate whatever CAs the server names.
	kept := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify:   true, //nolint:gosec // as above
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &alice, nil },
	}}}
	defer kept.CloseIdleConnections()
	if got := fresh(); got != 401 {
		t.Fatalf("a client of a CA not in the bundle: %d, want 401", got)
	}
	if got := getStatus(t, kept, addr+"/x", ""); got != 401 {
		t.Fatalf("a client of a CA not in the bundle, certificate sent anyway: %d, want 401", got)
	}
	replaceFile(t, caFile, append(append([]byte{}, oldCA.pem...), newCA.pem...))
	if got := fresh(); got != 404 {
		t.Errorf("the bundle holds the new CA, new connection: %d, want the handler's 404", got)
	}
	if got := getStatus(t, kept, addr+"/x", ""); got != 404 {
		t.Errorf("the bundle holds the new CA, connection kept open: %d, want the handler's 404", got)
	}
	replaceFile(t, caFile, []byte("no certificates"))
	if got := fresh(); got != 404 {
		t.Errorf("a bundle without certificates: %d, want the last good bundle's 404", got)
	}
	replaceFile(t, caFile, oldCA.pem)
	if got := fresh(); got != 401 {
		t.Errorf("the new CA removed from the bundle: %d, want 401", got)
	}
}
