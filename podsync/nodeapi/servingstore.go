package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"k8s.io/utils/clock"
)

// ServingStoreFile is where ServingCertificates keeps the issued serving
// certificate and its key in its directory, as the kubelet keeps its
// current one.
const ServingStoreFile = "kubelet-server-current.pem"

// ServingCertificates is the kubelet's serverTLSBootstrap as a part of an
// agent: the node API serves the certificate kept in the directory while
// it is still valid; else none (handshakes fail, as the kubelet's do) until
// Run has requested one from the API server as the node, someone has
// approved the request and the signer has issued it. Run renews it between
// 70% and 90% of its validity (RenewServingCertificate), keeps each new one
// on disk, and serves the old one while a request fails or is denied.
type ServingCertificates struct {
	opts  ServingCSROptions
	store string
	cur   atomic.Pointer[tls.Certificate]
}

// NewServingCertificates reads the certificate kept in dir, if any is
// still valid by opts.Clock, and returns the store. It makes no request.
func NewServingCertificates(opts ServingCSROptions, dir string) (*ServingCertificates, error) {
	if dir == "" {
		return nil, errors.New("nodeapi: NewServingCertificates: no directory")
	}
	s := &ServingCertificates{opts: opts, store: filepath.Join(dir, ServingStoreFile)}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if b, err := os.ReadFile(s.store); err == nil {
		if c, err := parseKeyPair([][]byte{b, b}); err == nil && clk.Now().Before(c.Leaf.NotAfter) {
			s.cur.Store(c)
		}
	}
	return s, nil
}

// Current returns the certificate to serve, nil while there is none
// (ServerOptions.Certificate).
func (s *ServingCertificates) Current() *tls.Certificate { return s.cur.Load() }

// Run requests and renews the certificate until ctx ends.
func (s *ServingCertificates) Run(ctx context.Context) error {
	return RenewServingCertificate(ctx, s.opts, s.leaf, s.install)
}

func (s *ServingCertificates) leaf() *x509.Certificate {
	if c := s.cur.Load(); c != nil {
		return c.Leaf
	}
	return nil
}

func (s *ServingCertificates) install(certPEM, keyPEM []byte) error {
	c, err := parseKeyPair([][]byte{certPEM, keyPEM})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.store), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(s.store, append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
		return fmt.Errorf("keeping the serving certificate: %w", err)
	}
	s.cur.Store(c)
	return nil
}
