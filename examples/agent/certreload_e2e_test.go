package main

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
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/nodekit/nodekit/internal/controlplane"
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

// With --rotate-server-certificates the agent asks the API server for its
// serving certificate (a kubernetes.io/kubelet-serving
// CertificateSigningRequest as the node) and serves none until it is
// issued; once approved and signed by kube-controller-manager with the
// cluster's CA, the node API serves it.
func TestAgentServingCertificateBootstrap(t *testing.T) {
	cp := controlplane.Need(t, cp)
	signer, err := cp.StartSigner()
	if errors.Is(err, controlplane.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = signer.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := cp.AdminClient()
	hostIP, err := utilnet.ResolveBindAddress(net.IPv4zero)
	if err != nil || hostIP.IsUnspecified() {
		t.Fatalf("no default-route address for the node API: %v", err)
	}
	_, p, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	const node = "e2e-servingcsr"
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	startAgent(t, node, "--port="+p, "--address="+hostIP.String(), "--node-ip="+hostIP.String(),
		"--cert-dir="+t.TempDir(), "--client-ca-file="+cp.ClientCAFile(), "--rotate-server-certificates")

	var csr *certificatesv1.CertificateSigningRequest
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the node's kubelet-serving request", func() bool {
		list, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i := range list.Items {
			if c := &list.Items[i]; c.Spec.Username == "system:node:"+node && c.Spec.SignerName == certificatesv1.KubeletServingSignerName {
				csr = c
				return true
			}
		}
		return false
	})
	t.Cleanup(func() {
		_ = admin.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csr.Name, metav1.DeleteOptions{})
	})
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(cp.ClientCAFile())
	if err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("reading the cluster CA: %v", err)
	}
	addr := net.JoinHostPort(hostIP.String(), p)
	dial := func() (*x509.Certificate, error) {
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: hostIP.String()})
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	if _, err := dial(); err == nil {
		t.Errorf("the node API served a certificate of the cluster CA before its request was approved")
	}

	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "E2E", Message: "approved by the test"})
	if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var leaf *x509.Certificate
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the node API serving the issued certificate", func() bool {
		if err := signer.Exited(); err != nil {
			t.Fatal(err)
		}
		leaf, err = dial()
		return err == nil
	})
	if leaf.Subject.CommonName != "system:node:"+node || len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(hostIP) {
		t.Errorf("served certificate: subject %v, IPs %v; want system:node:%s for %s", leaf.Subject, leaf.IPAddresses, node, hostIP)
	}
}
