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
	"k8s.io/klog/v2"
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
// it. The certificate is not renewed before it expires: a restart after
// that requests a new one. A denied request is logged and not made again
// until a restart.
func (a *agent) bootstrapServing(cfg *config, clk clock.WithTicker) (func() *tls.Certificate, error) {
	if a.client == nil {
		return nil, errors.New("needs --kubeconfig")
	}
	var cur atomic.Pointer[tls.Certificate]
	store := filepath.Join(cfg.certDir, servingStoreFile)
	if b, err := os.ReadFile(store); err == nil {
		if c, err := tls.X509KeyPair(b, b); err == nil {
			if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil && clk.Now().Before(leaf.NotAfter) {
				c.Leaf = leaf
				cur.Store(&c)
				return cur.Load, nil
			}
		}
	}
	ips := cfg.nodeIPs
	if len(ips) == 0 {
		if ip, err := utilnet.ResolveBindAddress(net.IPv4zero); err == nil && ip != nil && !ip.IsUnspecified() {
			ips = []net.IP{ip}
		}
	}
	csrs := a.client.CertificateSigningRequests()
	a.components = append(a.components, component{name: "serving certificate request", run: func(ctx context.Context) error {
		certPEM, keyPEM, err := nodeapi.RequestServingCertificate(ctx, nodeapi.ServingCSROptions{
			CSRs: csrs, NodeName: a.name, Hostnames: []string{a.name}, IPs: ips, Clock: clk,
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, nodeapi.ErrCSRDenied) {
				return err
			}
			klog.FromContext(ctx).Error(err, "The node API has no serving certificate; restart the agent to request another")
			<-ctx.Done()
			return nil
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(cfg.certDir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(store, append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
			return fmt.Errorf("keeping the serving certificate: %w", err)
		}
		cur.Store(&c)
		<-ctx.Done()
		return nil
	}})
	return cur.Load, nil
}
