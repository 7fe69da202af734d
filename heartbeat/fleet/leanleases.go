package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

const protobufType = "application/vnd.kubernetes.protobuf"

// protobufMagic starts every Kubernetes protobuf body.
var protobufMagic = []byte{'k', '8', 's', 0}

// LeanLeases returns a client of the leases in namespace with a leaner path
// for the requests of a fleet's renewers: Get, Create and Update of a Lease
// (with empty options) are sent as protobuf straight over an HTTP client
// built from cfg (its TLS, credentials, user agent and wrapped transports),
// without client-go's request builder, and the answer is decoded straight
// into the Lease. On the wire they are the requests client-go makes; errors
// are the API errors client-go returns (apierrors.IsNotFound, IsConflict,
// ... hold). Every other request goes through leases, a client of the same
// namespace. With 1,000 nodes on a real API server this takes a quarter off
// the CPU time of lease renewals.
func LeanLeases(leases LeaseClient, cfg *rest.Config, namespace string) (*LeanLeaseClient, error) {
	if leases == nil || cfg == nil || namespace == "" {
		return nil, errors.New("fleet: LeanLeases needs a lease client, its rest.Config and its namespace")
	}
	hc, t, err := leanHTTPClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("fleet: LeanLeases: %w", err)
	}
	base, err := url.Parse(cfg.Host)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("fleet: LeanLeases: bad host %q", cfg.Host)
	}
	if base.Scheme == "" {
		base.Scheme = "https"
	}
	prefix := strings.TrimSuffix(base.Scheme+"://"+base.Host+base.Path, "/") + "/apis/coordination.k8s.io/v1/namespaces/"
	return &LeanLeaseClient{LeaseClient: leases, lean: &leanLeases{hc: hc, t: t, prefix: prefix}, ns: namespace}, nil
}

// CloseIdleConnections closes the idle connections of the lean lease path
// (it keeps an HTTP/2 connection of its own): call it once the fleet has
// stopped.
func (c *LeanLeaseClient) CloseIdleConnections() { c.lean.t.CloseIdleConnections() }

// leanHTTPClient returns an HTTP client with cfg's TLS, credentials, user
// agent and wrapped transports, whose HTTP/2 connection does not index
// request headers in the HPACK dynamic table: every lease request has a path
// of its own, which would evict an entry per request (about 7% of a fleet's
// CPU time), for a saving of a few dozen bytes per request.
func leanHTTPClient(cfg *rest.Config) (*http.Client, *http.Transport, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	t := &http.Transport{
		Proxy:               cfg.Proxy,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 25,
		ForceAttemptHTTP2:   true,
		HTTP2:               &http.HTTP2Config{MaxEncoderHeaderTableSize: 1},
	}
	if t.Proxy == nil {
		t.Proxy = http.ProxyFromEnvironment
	}
	if cfg.Dial != nil {
		t.DialContext = cfg.Dial
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, t)
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Transport: rt, Timeout: cfg.Timeout}, t, nil
}

// leanLeases is the shared HTTP side of LeanLeases.
type leanLeases struct {
	hc     *http.Client
	t      *http.Transport
	prefix string // .../apis/coordination.k8s.io/v1/namespaces/
	bufs   sync.Pool
}

// LeanLeaseClient is the LeaseClient LeanLeases returns.
type LeanLeaseClient struct {
	LeaseClient
	lean *leanLeases
	ns   string
}

// Get reads a lease.
func (c *LeanLeaseClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if opts != (metav1.GetOptions{}) {
		return c.LeaseClient.Get(ctx, name, opts)
	}
	return c.lean.do(ctx, http.MethodGet, c.ns, name, nil)
}

// Create creates a lease.
func (c *LeanLeaseClient) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if !emptyCreate(opts) {
		return c.LeaseClient.Create(ctx, l, opts)
	}
	return c.lean.do(ctx, http.MethodPost, c.ns, "", l)
}

// Update writes a lease.
func (c *LeanLeaseClient) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if !emptyUpdate(opts) || l.Name == "" {
		return c.LeaseClient.Update(ctx, l, opts)
	}
	return c.lean.do(ctx, http.MethodPut, c.ns, l.Name, l)
}

func emptyCreate(o metav1.CreateOptions) bool {
	return len(o.DryRun) == 0 && o.FieldManager == "" && o.FieldValidation == ""
}

func emptyUpdate(o metav1.UpdateOptions) bool {
	return len(o.DryRun) == 0 && o.FieldManager == "" && o.FieldValidation == ""
}

var leaseTypeMeta = runtime.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}

func (c *leanLeases) buffer() *bytes.Buffer {
	if b, ok := c.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// do sends one request and decodes its answer.
func (c *leanLeases) do(ctx context.Context, method, ns, name string, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	u := c.prefix + url.PathEscape(ns) + "/leases"
	if name != "" {
		u += "/" + url.PathEscape(name)
	}
	var body io.Reader
	if l != nil {
		raw, err := l.Marshal()
		if err != nil {
			return nil, err
		}
		env, err := (&runtime.Unknown{TypeMeta: leaseTypeMeta, Raw: raw}).Marshal()
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(append(protobufMagic[:len(protobufMagic):len(protobufMagic)], env...))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", protobufType+", application/json")
	if l != nil {
		req.Header.Set("Content-Type", protobufType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	buf := c.buffer()
	defer c.bufs.Put(buf)
	_, err = buf.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	raw, isProto := unwrap(buf.Bytes(), resp.Header.Get("Content-Type"))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, leanError(resp.StatusCode, method, name, buf.Bytes(), raw, isProto)
	}
	if !isProto {
		return nil, fmt.Errorf("fleet: %s lease %s/%s: unexpected answer of type %q", method, ns, name, resp.Header.Get("Content-Type"))
	}
	out := &coordinationv1.Lease{}
	if err := out.Unmarshal(raw); err != nil {
		return nil, fmt.Errorf("fleet: %s lease %s/%s: decode: %w", method, ns, name, err)
	}
	out.APIVersion, out.Kind = leaseTypeMeta.APIVersion, leaseTypeMeta.Kind
	return out, nil
}

// unwrap returns the object bytes of a Kubernetes protobuf body.
func unwrap(b []byte, contentType string) ([]byte, bool) {
	if !strings.HasPrefix(contentType, protobufType) || !bytes.HasPrefix(b, protobufMagic) {
		return nil, false
	}
	var u runtime.Unknown
	if err := u.Unmarshal(b[len(protobufMagic):]); err != nil {
		return nil, false
	}
	return u.Raw, true
}

var leaseResource = coordinationv1.Resource("leases")

// leanError turns an error answer into the error client-go would return.
func leanError(code int, method, name string, body, raw []byte, isProto bool) error {
	if isProto {
		var st metav1.Status
		if err := st.Unmarshal(raw); err == nil && st.Status == metav1.StatusFailure {
			if st.Code == 0 {
				st.Code = int32(code)
			}
			return apierrors.FromObject(&st)
		}
	}
	verb := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update"}[method]
	return apierrors.NewGenericServerResponse(code, verb, leaseResource, name, string(body), 0, true)
}
