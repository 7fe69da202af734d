package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

func TestNewPortOptions(t *testing.T) {
	ln := &net.TCPListener{}
	for _, tc := range []struct {
		o    PortOptions
		want string
	}{
		{PortOptions{Listener: ln}, "PortOptions.NodeName is required"},
		{PortOptions{NodeName: "n1"}, "PortOptions.Listener is required"},
		{PortOptions{NodeName: "n1", Listener: ln, ServingCertificates: &ServingCSROptions{}}, "needs Server.CertDir"},
	} {
		if _, err := NewPort(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPort(%+v) = %v; want %q", tc.o, err, tc.want)
		}
	}
}

// The port serves its handler over TLS, as the node, until ctx ends.
func TestPortServes(t *testing.T) {
	defer leakcheck.Check(t)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api, err := NewPort(PortOptions{NodeName: "n1", Listener: ln,
		Server: ServerOptions{Auth: AuthOptions{Anonymous: true, AlwaysAllow: true}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Run(ctx) }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("GET /healthz: %d %q", resp.StatusCode, body)
	}
	if cert := resp.TLS.PeerCertificates[0]; len(cert.DNSNames) != 1 || cert.DNSNames[0] != "n1" {
		t.Errorf("self-signed certificate for %v, want the node name n1", cert.DNSNames)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// With ServingCertificates, the port requests its certificate as the
// node, for the node's name and Server.IPs, and serves nothing until it is
// issued.
func TestPortRequestsServingCertificate(t *testing.T) {
	defer leakcheck.Check(t)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	csrs := fake.NewClientset().CertificatesV1().CertificateSigningRequests()
	api, err := NewPort(PortOptions{NodeName: "n1", Listener: ln,
		Server:              ServerOptions{CertDir: t.TempDir(), IPs: []net.IP{net.ParseIP("192.0.2.7")}, Auth: AuthOptions{AlwaysAllow: true, Anonymous: true}},
		ServingCertificates: &ServingCSROptions{CSRs: csrs, PollInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Run(ctx) }()
	var req *x509.CertificateRequest
	testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, "a serving CSR", func() bool {
		list, err := csrs.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		block, _ := pem.Decode(list.Items[0].Spec.Request)
		req, err = x509.ParseCertificateRequest(block.Bytes)
		return err == nil
	})
	if req.Subject.CommonName != "system:node:n1" || len(req.DNSNames) != 1 || req.DNSNames[0] != "n1" ||
		len(req.IPAddresses) != 1 || !req.IPAddresses[0].Equal(net.ParseIP("192.0.2.7")) {
		t.Errorf("CSR for %q, names %v, IPs %v; want system:node:n1, [n1], [192.0.2.7]", req.Subject.CommonName, req.DNSNames, req.IPAddresses)
	}
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Error("a TLS handshake succeeded before any certificate was issued")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
