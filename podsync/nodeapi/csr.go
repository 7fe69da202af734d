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
	"net"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/randutil"
)

// CertificateSigningRequestClient creates and reads
// CertificateSigningRequests (certificates.k8s.io/v1). Its methods are
// client-go's, so clientset.CertificatesV1().CertificateSigningRequests()
// is one.
type CertificateSigningRequestClient interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
}

// Defaults and bounds of ServingCSROptions.PollInterval.
const (
	DefaultCSRPollInterval = time.Second
	MinCSRPollInterval     = 10 * time.Millisecond
	MaxCSRPollInterval     = time.Minute
)

// ServingCSROptions configure RequestServingCertificate.
type ServingCSROptions struct {
	// CSRs creates the request and reads it back, as the node (the Node
	// authorizer lets a node create and read its requests). Required.
	CSRs CertificateSigningRequestClient
	// NodeName makes the subject: CN system:node:<NodeName>, O
	// system:nodes, as the kubernetes.io/kubelet-serving signer requires.
	// Required.
	NodeName string
	// Hostnames and IPs are the certificate's names (the Node's
	// addresses); at least one is required.
	Hostnames []string
	IPs       []net.IP
	// PollInterval is how often the request is read until it is issued.
	// Default DefaultCSRPollInterval (1s), between MinCSRPollInterval and
	// MaxCSRPollInterval.
	PollInterval time.Duration
	// Clock paces the polls, and RenewServingCertificate's waits. Default
	// clock.RealClock{}.
	Clock clock.Clock
	// Rand returns a number in [0, 1): RenewServingCertificate draws each
	// certificate's renewal point with it. Default math/rand/v2's Float64.
	Rand func() float64
}

// ErrCSRDenied is wrapped by RequestServingCertificate's error when the
// request was denied or failed.
var ErrCSRDenied = errors.New("certificate signing request denied or failed")

// RequestServingCertificate asks the API server for a serving certificate
// as kubelet's serverTLSBootstrap does: a new ECDSA P-256 key, a
// CertificateSigningRequest for signer kubernetes.io/kubelet-serving with
// usages digital signature and server auth, then the request read every
// PollInterval until the signer has issued the certificate (someone must
// approve it first: nothing in the cluster approves kubelet-serving
// requests by default). It returns the certificate (PEM, as issued) and
// its key (PEM); an error wrapping ErrCSRDenied when the request is denied
// or failed, or ctx's error when ctx ends first.
func RequestServingCertificate(ctx context.Context, opts ServingCSROptions) (certPEM, keyPEM []byte, err error) {
	switch {
	case opts.CSRs == nil:
		return nil, nil, optcheck.Required("nodeapi: ServingCSROptions.CSRs")
	case opts.NodeName == "":
		return nil, nil, optcheck.Required("nodeapi: ServingCSROptions.NodeName")
	case len(opts.Hostnames) == 0 && len(opts.IPs) == 0:
		return nil, nil, errors.New("nodeapi: ServingCSROptions: no Hostnames or IPs to name in the certificate")
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultCSRPollInterval
	}
	if err := optcheck.Range("nodeapi: ServingCSROptions.PollInterval", opts.PollInterval, MinCSRPollInterval, MaxCSRPollInterval); err != nil {
		return nil, nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:" + opts.NodeName, Organization: []string{"system:nodes"}},
		DNSNames:    opts.Hostnames,
		IPAddresses: opts.IPs,
	}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("nodeapi: certificate request: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	csr, err := opts.CSRs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("nodeapi: creating the serving certificate's request: %w", err)
	}
	name := csr.Name
	klog.FromContext(ctx).Info("Node API: requested a serving certificate; waiting for approval and issue", "csr", name)
	for {
		for _, c := range csr.Status.Conditions {
			if (c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed) && c.Status == corev1.ConditionTrue {
				return nil, nil, fmt.Errorf("nodeapi: %w: %s %s: %s: %s", ErrCSRDenied, name, c.Type, c.Reason, c.Message)
			}
		}
		if len(csr.Status.Certificate) > 0 {
			if _, err := tls.X509KeyPair(csr.Status.Certificate, keyPEM); err != nil {
				return nil, nil, fmt.Errorf("nodeapi: the certificate issued for %s: %w", name, err)
			}
			klog.FromContext(ctx).Info("Node API: serving certificate issued", "csr", name)
			return csr.Status.Certificate, keyPEM, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("nodeapi: waiting for %s: %w", name, ctx.Err())
		case <-opts.Clock.After(opts.PollInterval):
		}
		got, err := opts.CSRs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			// Transient (the API server restarting): read it again at
			// the next poll.
			klog.FromContext(ctx).V(2).Info("Node API: reading the serving certificate's request", "csr", name, "err", err)
			continue
		}
		csr = got
	}
}

// Waits of RenewServingCertificate after a failed request: doubling from
// the first to the last.
const (
	RenewRetryFirst = time.Second
	RenewRetryMax   = 5 * time.Minute
)

// RenewServingCertificate keeps the node API's serving certificate
// current, as kubelet's certificate manager does under serverTLSBootstrap,
// until ctx ends (it then returns nil). When current returns nil it
// requests a certificate at once (RequestServingCertificate with opts);
// else once the certificate reaches a point drawn between 70% and 90% of
// its validity (opts.Rand). A certificate it gets goes to install, which
// keeps and serves it. A request that fails or is denied is made again
// after a wait that doubles from RenewRetryFirst to RenewRetryMax, while
// the certificate current returns, if any, is served on.
func RenewServingCertificate(ctx context.Context, opts ServingCSROptions, current func() *x509.Certificate, install func(certPEM, keyPEM []byte) error) error {
	if current == nil || install == nil {
		return errors.New("nodeapi: RenewServingCertificate needs current and install")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.Rand = randutil.Or(opts.Rand)
	log := klog.FromContext(ctx)
	var retry time.Duration // 0: no failure since the last certificate
	for {
		wait := retry
		if c := current(); c != nil && retry == 0 {
			life := c.NotAfter.Sub(c.NotBefore)
			at := c.NotBefore.Add(time.Duration(float64(life) * (0.7 + 0.2*opts.Rand())))
			log.Info("Node API: serving certificate renewal scheduled", "at", at, "expires", c.NotAfter)
			wait = at.Sub(opts.Clock.Now())
		}
		if !loop.Sleep(ctx, opts.Clock, wait) {
			return nil
		}
		certPEM, keyPEM, err := RequestServingCertificate(ctx, opts)
		if err == nil {
			err = install(certPEM, keyPEM)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			retry = min(max(2*retry, RenewRetryFirst), RenewRetryMax)
			log.Error(err, "Node API: no new serving certificate; requesting one again later", "in", retry)
			continue
		}
		retry = 0
	}
}
