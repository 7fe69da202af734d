package nodekit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/client-go/util/flowcontrol"
)

// Content types.
const (
	ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	ContentTypeJSON     = "application/json"
)

// NewScheme returns a scheme that knows core/v1, coordination.k8s.io/v1,
// authentication.k8s.io/v1, authorization.k8s.io/v1, certificates.k8s.io/v1,
// node.k8s.io/v1 (RuntimeClasses) and the meta/v1 types (Status, options, watch
// events): all the client decodes, and what a record.EventRecorder needs to
// refer to Pods and Nodes.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme, certificatesv1.AddToScheme, nodev1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
}

// Client is the small API client of a node agent: clients
// of the resources a node agent reads and writes (Nodes, Leases, Pods,
// Events, Secrets, ConfigMaps, Services, ServiceAccounts' tokens,
// RuntimeClasses) and the
// reviews a node API server makes (TokenReviews, SubjectAccessReviews),
// each with the methods and signatures of client-go's typed clients, so
// that they are the clients nodekit's packages declare, built on client-go's
// rest package with a scheme of its own.
//
// client-go's clientset registers every API group in its scheme when its
// package is initialised, and its typed clients bring the apply
// configurations of every group along: some 10 MiB of a small process's
// resident memory. This scheme registers core/v1, coordination.k8s.io/v1,
// authentication.k8s.io/v1 (TokenRequest, TokenReview),
// authorization.k8s.io/v1 (SubjectAccessReview), certificates.k8s.io/v1
// (CertificateSigningRequest: a node API's serving certificate),
// node.k8s.io/v1 (RuntimeClass) and the meta/v1 options,
// and nothing of client-go's kubernetes packages is imported.
//
// On the wire the clients speak protobuf unless the rest.Config asks for
// another content type: application/vnd.kubernetes.protobuf for the answers
// and for the bodies of creates and updates, as kubelet's client does;
// merge and strategic-merge patches are JSON, as the API requires.
//
// What the clients decode comes without metadata.managedFields (an
// object's, a list's items', a watch event's): nothing in a node reads
// them, and they are much of a decoded pod. An update sent without them
// leaves the API server's as they are.
//
// Client is the API client: one HTTP client, one rate limiter and one REST
// client per API group, shared by every resource client it returns.
type Client struct {
	scheme *runtime.Scheme
	params runtime.ParameterCodec
	core   rest.Interface
	coord  rest.Interface
	authn  rest.Interface
	authz  rest.Interface
	certs  rest.Interface
	node   rest.Interface
	dialer *connrotation.Dialer // nil: the rest.Config's own Dial
}

// CloseConnections closes every connection the client opened, idle or
// not, so that the next request dials again: heartbeat.Options'
// OnRepeatedFailure, as the kubelet closes its connections after repeated
// heartbeat failures (a dead TCP connection, say after a load balancer
// dropped it, would otherwise be reused until HTTP/2's health check gives
// up on it). It does nothing when the rest.Config brought its own Dial.
func (c *Client) CloseConnections() {
	if c.dialer != nil {
		c.dialer.CloseAll()
	}
}

// NewClient returns a Client for cfg: its host, TLS, credentials, user agent,
// dialer, wrapped transports, timeout and rate limit (QPS and Burst,
// client-go's 5 and 10 when zero, none with a negative QPS; one limiter for
// all requests). An empty cfg.ContentType means protobuf. Without a
// cfg.Dial, connections are dialled through a dialer that
// CloseConnections can close.
func NewClient(cfg *rest.Config) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("nodekit: nil rest.Config")
	}
	var dialer *connrotation.Dialer
	if cfg.Dial == nil {
		cfg = rest.CopyConfig(cfg)
		dialer = connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
		cfg.Dial = dialer.DialContext
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("nodekit: HTTP client: %w", err)
	}
	c, err := NewClientForHTTPClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	c.dialer = dialer
	return c, nil
}

// NewClientForHTTPClient is NewClient with the HTTP client given, for callers that
// share one.
func NewClientForHTTPClient(cfg *rest.Config, hc *http.Client) (*Client, error) {
	if cfg == nil || hc == nil {
		return nil, errors.New("nodekit: nil rest.Config or HTTP client")
	}
	s, err := NewScheme()
	if err != nil {
		return nil, fmt.Errorf("nodekit: scheme: %w", err)
	}
	c := &Client{scheme: s, params: runtime.NewParameterCodec(s)}
	base := rest.CopyConfig(cfg)
	if base.ContentType == "" {
		base.ContentType = ContentTypeProtobuf
	}
	if base.AcceptContentTypes == "" {
		base.AcceptContentTypes = base.ContentType
		if base.ContentType != ContentTypeJSON {
			base.AcceptContentTypes += "," + ContentTypeJSON
		}
	}
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if base.RateLimiter == nil && base.QPS >= 0 { // a negative QPS: no limit
		qps, burst := base.QPS, base.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst <= 0 {
			burst = rest.DefaultBurst
		}
		base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	base.NegotiatedSerializer = newWithoutManagedFieldsSerializer(serializer.NewCodecFactory(s).WithoutConversion())
	if c.core, err = restClient(base, hc, "/api", corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.coord, err = restClient(base, hc, "/apis", coordinationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.authn, err = restClient(base, hc, "/apis", authenticationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.authz, err = restClient(base, hc, "/apis", authorizationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.certs, err = restClient(base, hc, "/apis", certificatesv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.node, err = restClient(base, hc, "/apis", nodev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	return c, nil
}

func restClient(base *rest.Config, hc *http.Client, apiPath string, gv schema.GroupVersion) (rest.Interface, error) {
	cfg := rest.CopyConfig(base)
	cfg.APIPath, cfg.GroupVersion = apiPath, &gv
	rc, err := rest.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("nodekit: REST client of %s: %w", gv, err)
	}
	return rc, nil
}

// Scheme returns the client's scheme (see NewScheme), for a
// record.EventRecorder.
func (c *Client) Scheme() *runtime.Scheme { return c.scheme }

// Nodes returns the client of Nodes.
func (c *Client) Nodes() *NodeResource {
	n := &NodeResource{}
	n.res = c.resource("nodes", "", false)
	return n
}

// Pods returns the client of the Pods of namespace ("" for all).
func (c *Client) Pods(namespace string) *PodResource {
	n := &PodResource{}
	n.res = c.resource("pods", namespace, true)
	return n
}

// Events returns the client of the Events of namespace ("" for all).
func (c *Client) Events(namespace string) *EventResource {
	n := &EventResource{}
	n.res = c.resource("events", namespace, true)
	return n
}

// Secrets returns the client of the Secrets of namespace ("" for all).
func (c *Client) Secrets(namespace string) *SecretResource {
	n := &SecretResource{}
	n.res = c.resource("secrets", namespace, true)
	return n
}

// ConfigMaps returns the client of the ConfigMaps of namespace ("" for all).
func (c *Client) ConfigMaps(namespace string) *ConfigMapResource {
	n := &ConfigMapResource{}
	n.res = c.resource("configmaps", namespace, true)
	return n
}

// Services returns the client of the Services of namespace ("" for all).
func (c *Client) Services(namespace string) *ServiceResource {
	n := &ServiceResource{}
	n.res = c.resource("services", namespace, true)
	return n
}

// ServiceAccounts returns the client of the ServiceAccounts of namespace,
// which requests their tokens.
func (c *Client) ServiceAccounts(namespace string) *ServiceAccountResource {
	return &ServiceAccountResource{c.resource("serviceaccounts", namespace, true)}
}

// Leases returns the client of the coordination.k8s.io/v1 Leases of
// namespace ("" for all).
func (c *Client) Leases(namespace string) *LeaseResource {
	n := &LeaseResource{}
	n.res = c.resource("leases", namespace, true)
	n.rc = c.coord
	return n
}

// CertificateSigningRequests returns the client of certificates.k8s.io/v1
// CertificateSigningRequests: a node API's serving certificate.
func (c *Client) CertificateSigningRequests() *CertificateSigningRequestResource {
	n := &CertificateSigningRequestResource{}
	n.res = c.resource("certificatesigningrequests", "", false)
	n.rc = c.certs
	return n
}

// RuntimeClasses returns the client of node.k8s.io/v1 RuntimeClasses,
// which the Node authorizer lets a node get, list and watch.
func (c *Client) RuntimeClasses() *RuntimeClassResource {
	n := &RuntimeClassResource{}
	n.res = c.resource("runtimeclasses", "", false)
	n.rc = c.node
	return n
}

// TokenReviews returns the client of authentication.k8s.io/v1
// TokenReviews: a node API server's bearer-token authentication.
func (c *Client) TokenReviews() *TokenReviewResource {
	return &TokenReviewResource{res{rc: c.authn, params: c.params, name: "tokenreviews"}}
}

// SubjectAccessReviews returns the client of authorization.k8s.io/v1
// SubjectAccessReviews: a node API server's authorization.
func (c *Client) SubjectAccessReviews() *SubjectAccessReviewResource {
	return &SubjectAccessReviewResource{res{rc: c.authz, params: c.params, name: "subjectaccessreviews"}}
}

func (c *Client) resource(name, namespace string, namespaced bool) res {
	return res{rc: c.core, params: c.params, name: name, ns: namespace, namespaced: namespaced}
}

// res addresses one resource of one API group, in one namespace or all.
type res struct {
	rc         rest.Interface
	params     runtime.ParameterCodec
	name       string
	ns         string
	namespaced bool
}

func (r res) req(verb string) *rest.Request {
	return r.rc.Verb(verb).NamespaceIfScoped(r.ns, r.namespaced && r.ns != "").Resource(r.name)
}

// object is what a resource's objects and lists are: pointers to API types.
type object[T any] interface {
	*T
	runtime.Object
}

// named is what an object of a resource is: it has a name.
type named[T any] interface {
	object[T]
	GetName() string
}

// typed is the generic body of every resource client: O is the object, L
// the list.
type typed[O any, PO named[O], L any, PL object[L]] struct{ res }

func listTimeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds != nil {
		return time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return 0
}

// Get reads the object called name.
func (t typed[O, PO, L, PL]) Get(ctx context.Context, name string, opts metav1.GetOptions) (PO, error) {
	out := PO(new(O))
	err := t.req(http.MethodGet).Name(name).VersionedParams(&opts, t.params).Do(ctx).Into(out)
	return out, err
}

// List lists the objects.
func (t typed[O, PO, L, PL]) List(ctx context.Context, opts metav1.ListOptions) (PL, error) {
	out := PL(new(L))
	err := t.req(http.MethodGet).VersionedParams(&opts, t.params).Timeout(listTimeout(opts)).Do(ctx).Into(out)
	return out, err
}

// Watch watches the objects.
func (t typed[O, PO, L, PL]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return t.req(http.MethodGet).VersionedParams(&opts, t.params).Timeout(listTimeout(opts)).Watch(ctx)
}

// Create creates obj.
func (t typed[O, PO, L, PL]) Create(ctx context.Context, obj PO, opts metav1.CreateOptions) (PO, error) {
	out := PO(new(O))
	err := t.req(http.MethodPost).VersionedParams(&opts, t.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj.
func (t typed[O, PO, L, PL]) Update(ctx context.Context, obj PO, opts metav1.UpdateOptions) (PO, error) {
	out := PO(new(O))
	err := t.req(http.MethodPut).Name(obj.GetName()).VersionedParams(&opts, t.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch patches the object called name, or its subresource.
func (t typed[O, PO, L, PL]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (PO, error) {
	out := PO(new(O))
	err := t.rc.Patch(pt).NamespaceIfScoped(t.ns, t.namespaced && t.ns != "").Resource(t.name).Name(name).
		SubResource(subresources...).VersionedParams(&opts, t.params).Body(data).Do(ctx).Into(out)
	return out, err
}

// Delete deletes the object called name.
func (t typed[O, PO, L, PL]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return t.req(http.MethodDelete).Name(name).Body(&opts).Do(ctx).Error()
}

// DeleteCollection deletes the objects listOpts selects.
func (t typed[O, PO, L, PL]) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return t.req(http.MethodDelete).VersionedParams(&listOpts, t.params).Timeout(listTimeout(listOpts)).Body(&opts).Do(ctx).Error()
}

// NodeResource is the client of core/v1 Nodes.
type NodeResource struct {
	typed[corev1.Node, *corev1.Node, corev1.NodeList, *corev1.NodeList]
}

// PodResource is the client of core/v1 Pods.
type PodResource struct {
	typed[corev1.Pod, *corev1.Pod, corev1.PodList, *corev1.PodList]
}

// EventResource is the client of core/v1 Events.
type EventResource struct {
	typed[corev1.Event, *corev1.Event, corev1.EventList, *corev1.EventList]
}

// SecretResource is the client of core/v1 Secrets.
type SecretResource struct {
	typed[corev1.Secret, *corev1.Secret, corev1.SecretList, *corev1.SecretList]
}

// ConfigMapResource is the client of core/v1 ConfigMaps.
type ConfigMapResource struct {
	typed[corev1.ConfigMap, *corev1.ConfigMap, corev1.ConfigMapList, *corev1.ConfigMapList]
}

// ServiceResource is the client of core/v1 Services.
type ServiceResource struct {
	typed[corev1.Service, *corev1.Service, corev1.ServiceList, *corev1.ServiceList]
}

// LeaseResource is the client of coordination.k8s.io/v1 Leases.
type LeaseResource struct {
	typed[coordinationv1.Lease, *coordinationv1.Lease, coordinationv1.LeaseList, *coordinationv1.LeaseList]
}

// RuntimeClassResource is the client of node.k8s.io/v1 RuntimeClasses.
type RuntimeClassResource struct {
	typed[nodev1.RuntimeClass, *nodev1.RuntimeClass, nodev1.RuntimeClassList, *nodev1.RuntimeClassList]
}

// CertificateSigningRequestResource is the client of certificates.k8s.io/v1
// CertificateSigningRequests.
type CertificateSigningRequestResource struct {
	typed[certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequestList, *certificatesv1.CertificateSigningRequestList]
}

// ServiceAccountResource is the client of core/v1 ServiceAccounts; it only
// requests tokens.
type ServiceAccountResource struct{ res }

// CreateToken requests a token of the ServiceAccount called
// serviceAccountName (serviceaccounts/token).
func (c *ServiceAccountResource) CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	out := &authenticationv1.TokenRequest{}
	err := c.req(http.MethodPost).Name(serviceAccountName).SubResource("token").
		VersionedParams(&opts, c.params).Body(tokenRequest).Do(ctx).Into(out)
	return out, err
}

// TokenReviewResource is the client of TokenReviews; it only creates them.
type TokenReviewResource struct{ res }

// Create asks the API server who a bearer token is.
func (c *TokenReviewResource) Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	return create(ctx, c.res, review, opts, &authenticationv1.TokenReview{})
}

// SubjectAccessReviewResource is the client of SubjectAccessReviews; it only
// creates them.
type SubjectAccessReviewResource struct{ res }

// Create asks the API server whether a user may do what a review describes.
func (c *SubjectAccessReviewResource) Create(ctx context.Context, review *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	return create(ctx, c.res, review, opts, &authorizationv1.SubjectAccessReview{})
}

// create POSTs obj to r and decodes the answer into out.
func create[T runtime.Object](ctx context.Context, r res, obj runtime.Object, opts metav1.CreateOptions, out T) (T, error) {
	err := r.req(http.MethodPost).VersionedParams(&opts, r.params).Body(obj).Do(ctx).Into(out)
	return out, err
}
