package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// servingStoreFile is where the issued serving certificate and its key are
// kept in --cert-dir, as kubelet keeps its current one.
const servingStoreFile = "kubelet-server-current.pem"

// bootstrapServing is --rotate-server-certificates (kubelet's
// serverTLSBootstrap): the node API serves the certificate kept in
// --cert-dir when it is still valid; else it serves none (handshakes fail,
// as kubelet's do) until a component has requested one from the API server
// as the node, someone has approved the request and the signer has issued
// it. The certificate is renewed between 70% and 90% of its validity, as
// kubelet renews its own (nodeapi.RenewServingCertificate); a request that
// fails or is denied is made again after a back-off, the old certificate
// served meanwhile.
func (a *agent) bootstrapServing(cfg *config, clk clock.WithTicker) (func() *tls.Certificate, error) {
	if a.client == nil {
		return nil, errors.New("needs --kubeconfig")
	}
	var cur atomic.Pointer[tls.Certificate]
	store := filepath.Join(cfg.certDir, servingStoreFile)
	if b, err := os.ReadFile(store); err == nil {
		if c, err := keyPair(b, b); err == nil && clk.Now().Before(c.Leaf.NotAfter) {
			cur.Store(c)
		}
	}
	ips := cfg.nodeIPs
	if len(ips) == 0 {
		if ip, err := utilnet.ResolveBindAddress(net.IPv4zero); err == nil && ip != nil && !ip.IsUnspecified() {
			ips = []net.IP{ip}
		}
	}
	opts := nodeapi.ServingCSROptions{CSRs: a.client.CertificateSigningRequests(), NodeName: a.name,
		Hostnames: []string{a.name}, IPs: ips, Clock: clk}
	current := func() *x509.Certificate {
		if c := cur.Load(); c != nil {
			return c.Leaf
		}
		return nil
	}
	install := func(certPEM, keyPEM []byte) error {
		c, err := keyPair(certPEM, keyPEM)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(cfg.certDir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(store, append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
			return fmt.Errorf("keeping the serving certificate: %w", err)
		}
		cur.Store(c)
		return nil
	}
	a.components = append(a.components, component{name: "serving certificate", run: func(ctx context.Context) error {
		return nodeapi.RenewServingCertificate(ctx, opts, current, install)
	}})
	return cur.Load, nil
}

// keyPair parses a certificate and its key (PEM) with its leaf.
func keyPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &c, nil
}
