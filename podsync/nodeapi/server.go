package nodeapi

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
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/httpserve"
	"github.com/nodekit/nodekit/internal/optcheck"
)

// Defaults of ServerOptions.
const (
	// DefaultPort is kubelet's port for its node API.
	DefaultPort = 10250
	// SelfSignedValidity is how long a self-signed serving certificate is
	// valid, as kubelet's.
	SelfSignedValidity = 365 * 24 * time.Hour
	// ShutdownGrace is how long Run waits for requests in flight once its
	// context ends, before closing their connections.
	ShutdownGrace = 5 * time.Second
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers.
	ReadHeaderTimeout = 30 * time.Second
)

// ServerOptions configure a Server. The zero value of each field means its
// default.
type ServerOptions struct {
	// Handler serves the authorized requests: a *Handler, or a mux with
	// more paths. Required.
	Handler http.Handler
	// Auth configures authentication and authorization. Auth.Clock
	// defaults to Clock.
	Auth AuthOptions
	// CertFile and KeyFile are the serving certificate (PEM, the chain
	// after the leaf) and its key (kubelet's tlsCertFile and
	// tlsPrivateKeyFile). They are read again when either changes on disk
	// or ReloadResync after the last read (looked at once per TLS
	// handshake), as kubelet reloads them; a pair that does not load (one
	// file written, the other not yet) is logged and the last good pair
	// served. Both empty: a self-signed certificate is made at start for
	// Hostnames and IPs, as kubelet does.
	CertFile, KeyFile string
	// Certificate, when set (and CertFile and KeyFile are not), is asked
	// for the serving certificate at each TLS handshake: a certificate
	// requested with RequestServingCertificate once it is issued (kubelet's
	// serverTLSBootstrap). It returns nil while there is none, and the
	// handshake fails, as kubelet's does before its request is issued.
	Certificate func() *tls.Certificate
	// CertDir, when set and CertFile and KeyFile are not, keeps the
	// self-signed pair in CertDir/kubelet.crt and CertDir/kubelet.key, as
	// kubelet's --cert-dir: read when both are there, else made and
	// written, so that a restart serves the same certificate. Empty: the
	// pair is made at each start and kept in memory.
	CertDir string
	// Hostnames are the DNS names of a self-signed certificate; the first
	// is its subject. Default: os.Hostname().
	Hostnames []string
	// IPs are the addresses of a self-signed certificate. Default: the
	// host's interface addresses.
	IPs []net.IP
	// Clock dates a self-signed certificate and is Auth.Clock's default.
	// Default clock.RealClock{}.
	Clock clock.Clock
}

// Server serves a handler over TLS 1.2 or later, authenticated and
// authorized as kubelet's port 10250 is.
type Server struct {
	auth    *Auth
	handler http.Handler
	// tls is the base configuration; each handshake gets a clone of it
	// with the client CAs of the moment (configFor).
	tls *tls.Config
	// cert returns the serving certificate of the moment.
	cert func(context.Context) *tls.Certificate

	mu        sync.Mutex
	derived   *tls.Config    // tls with ClientCAs set to roots
	derivedOf *x509.CertPool // the roots derived was made for
}

// NewServer loads or makes the serving certificate and returns a Server.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Handler == nil {
		return nil, optcheck.Required("nodeapi: ServerOptions.Handler")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Auth.Clock == nil {
		opts.Auth.Clock = opts.Clock
	}
	auth, err := NewAuth(opts.Auth)
	if err != nil {
		return nil, err
	}
	s := &Server{auth: auth, handler: auth.Wrap(opts.Handler)}
	switch {
	case opts.Certificate != nil && (opts.CertFile != "" || opts.KeyFile != ""):
		return nil, errors.New("nodeapi: ServerOptions: set Certificate or CertFile and KeyFile, not both")
	case opts.Certificate != nil:
		get := opts.Certificate
		s.cert = func(context.Context) *tls.Certificate { return get() }
	case opts.CertFile != "" && opts.KeyFile != "":
		certFile, keyFile := opts.CertFile, opts.KeyFile
		r, err := newReloader("serving certificate", opts.Clock, parseKeyPair, certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("nodeapi: serving certificate: %w", err)
		}
		s.cert = r.current
	case opts.CertFile != "" || opts.KeyFile != "":
		return nil, errors.New("nodeapi: ServerOptions: set both CertFile and KeyFile, or neither")
	default:
		cert, err := selfSignedIn(opts.CertDir, opts.Hostnames, opts.IPs, opts.Clock.Now())
		if err != nil {
			return nil, fmt.Errorf("nodeapi: self-signed certificate: %w", err)
		}
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("nodeapi: serving certificate: %w", err)
		}
		s.cert = func(context.Context) *tls.Certificate { return &cert }
	}
	s.tls = &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.cert(hello.Context()); c != nil {
				return c, nil
			}
			return nil, errNoServingCertificate
		},
		// Requested, not verified by the handshake: Auth verifies it, so a
		// bad certificate is a 401 as kubelet answers, not a TLS alert.
		// The client CAs are only named to the client, so that it picks
		// a certificate they issued.
		ClientAuth: tls.RequestClientCert,
	}
	if auth.clientCAs != nil {
		s.tls.GetConfigForClient = s.configFor
	}
	return s, nil
}

// configFor is the handshake's configuration: the base one naming the
// client CAs of the moment, made again only when they changed.
func (s *Server) configFor(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	roots := s.auth.clientCAs(hello.Context())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.derived == nil || s.derivedOf != roots {
		// Cloned at the first handshake, after net/http added its
		// protocols (h2) to the base, as ServeTLS's own clone does.
		c := s.tls.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = roots
		if !slices.Contains(c.NextProtos, "http/1.1") {
			c.NextProtos = append(c.NextProtos, "http/1.1")
		}
		s.derived, s.derivedOf = c, roots
	}
	return s.derived, nil
}

// Certificate returns the serving certificate (the last one loaded when
// CertFile and KeyFile are reloaded; nil while ServerOptions.Certificate
// has none), for clients to trust a self-signed one.
func (s *Server) Certificate() *x509.Certificate {
	c := s.cert(context.Background())
	if c == nil {
		return nil
	}
	if c.Leaf == nil {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return nil
		}
		return leaf
	}
	return c.Leaf
}

var errNoServingCertificate = errors.New("nodeapi: no serving certificate yet")

// Auth returns the server's authenticator and authorizer.
func (s *Server) Auth() *Auth { return s.auth }

// ListenAndServe listens on addr (":10250" as kubelet; empty: that) and
// serves until ctx ends, like Run.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if addr == "" {
		addr = fmt.Sprintf(":%d", DefaultPort)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("nodeapi: %w", err)
	}
	return s.Run(ctx, ln)
}

// Run serves TLS on ln until ctx ends, then stops taking connections,
// waits up to ShutdownGrace for requests in flight (their contexts are
// cancelled, which ends followed logs) and closes ln. It returns nil when
// ctx ended and an error when serving failed.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	logger := klog.FromContext(ctx)
	srv := &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: ReadHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(c context.Context, _ net.Conn) context.Context {
			return context.WithValue(c, connAuthKey{}, &connAuth{})
		},
		ErrorLog: log.New(httpLogWriter{logger}, "", 0),
	}
	if err := httpserve.Run(ctx, srv, ShutdownGrace, func() error { return srv.ServeTLS(ln, "", "") }); err != nil {
		return fmt.Errorf("nodeapi: serving: %w", err)
	}
	return nil
}

// httpLogWriter sends net/http's own messages (TLS handshake errors) to the
// logger at V(4).
type httpLogWriter struct{ logger klog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	w.logger.V(4).Info("Node API server", "msg", string(p))
	return len(p), nil
}

// selfSignedIn reads the self-signed pair from dir, or makes it and writes
// it there; with no dir it only makes it.
func selfSignedIn(dir string, hostnames []string, ips []net.IP, now time.Time) (tls.Certificate, error) {
	if dir == "" {
		return selfSigned(hostnames, ips, now)
	}
	certFile, keyFile := filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	_, certErr := os.Stat(certFile)
	_, keyErr := os.Stat(keyFile)
	if certErr == nil && keyErr == nil {
		return tls.LoadX509KeyPair(certFile, keyFile)
	}
	cert, err := selfSigned(hostnames, ips, now)
	if err != nil {
		return cert, err
	}
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return cert, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cert, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return cert, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o644); err != nil {
		return cert, err
	}
	return cert, nil
}

// selfSigned makes a self-signed ECDSA P-256 certificate for hostnames and
// ips valid from now for SelfSignedValidity.
func selfSigned(hostnames []string, ips []net.IP, now time.Time) (tls.Certificate, error) {
	if len(hostnames) == 0 {
		h, err := os.Hostname()
		if err != nil {
			return tls.Certificate{}, err
		}
		hostnames = []string{h}
	}
	if ips == nil {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return tls.Certificate{}, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ips = append(ips, n.IP)
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", hostnames[0], now.Unix())},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(SelfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              hostnames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
