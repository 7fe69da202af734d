package nodeapi

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
)

// TokenReviewClient creates TokenReviews (authentication.k8s.io/v1).
// Its method is client-go's, so
// clientset.AuthenticationV1().TokenReviews() is one.
type TokenReviewClient interface {
	Create(ctx context.Context, tokenReview *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// SubjectAccessReviewClient creates SubjectAccessReviews
// (authorization.k8s.io/v1). Its method is client-go's, so
// clientset.AuthorizationV1().SubjectAccessReviews() is one.
type SubjectAccessReviewClient interface {
	Create(ctx context.Context, subjectAccessReview *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Users and groups the authenticator assigns, as the API server's.
const (
	AnonymousUser        = "system:anonymous"
	UnauthenticatedGroup = "system:unauthenticated"
	AuthenticatedGroup   = "system:authenticated"
)

// Defaults and bounds of AuthOptions: kubelet's
// authentication.webhook.cacheTTL and authorization.webhook's
// cacheAuthorizedTTL and cacheUnauthorizedTTL.
const (
	DefaultAuthenticationCacheTTL = 2 * time.Minute
	DefaultAuthorizedCacheTTL     = 5 * time.Minute
	DefaultUnauthorizedCacheTTL   = 30 * time.Second
	// DefaultReviewTimeout bounds one TokenReview or SubjectAccessReview,
	// its retries included.
	DefaultReviewTimeout = 10 * time.Second
	// DefaultReviewRetries is how often a review failing with a transient
	// error is retried: kubelet's webhook back-off makes 5 attempts.
	DefaultReviewRetries = 4
	// MaxReviewRetries bounds AuthOptions.ReviewRetries.
	MaxReviewRetries = 10
	// ReviewRetryInitial is the wait before the first retry; each next
	// one is 1.5 times longer (kubelet's webhook back-off, without its
	// jitter).
	ReviewRetryInitial = 500 * time.Millisecond
	// DefaultCacheSize bounds each cache (tokens, decisions).
	DefaultCacheSize = 4096
	// MaxCacheTTL bounds the cache TTLs; a negative TTL turns a cache off.
	MaxCacheTTL = time.Hour
	// MinReviewTimeout and MaxReviewTimeout bound AuthOptions.ReviewTimeout.
	MinReviewTimeout = 100 * time.Millisecond
	MaxReviewTimeout = 5 * time.Minute
)

// AuthOptions configure an Auth. The zero value of each field means its
// default; at least one way to authenticate (ClientCAFile or ClientCAs,
// TokenReviews, Anonymous) is required, and SubjectAccessReviews unless
// AlwaysAllow.
type AuthOptions struct {
	// NodeName is the name authorized requests are checked against
	// (nodes/<subresource> named NodeName). Required unless NodeNameFrom
	// is set.
	NodeName string
	// NodeNameFrom, when set, names the node each request is for, for one
	// server that serves several nodes (hollow nodes at addresses of their
	// own): Wrap asks it first and answers 404 "no node at this address"
	// when it finds none, before looking at credentials; Authorize checks
	// the request against the node it named (NodeName is not used).
	// Default nil: every request is for NodeName.
	NodeNameFrom func(r *http.Request) (node string, ok bool)
	// ClientCAFile is a PEM bundle client certificates are verified
	// against (kubelet's authentication.x509.clientCAFile); the user is
	// the certificate's CN and the groups its O. It is read again when it
	// changes on disk or ReloadResync after the last read (looked at once
	// per request, and per TLS handshake under Server), as kubelet
	// reloads it; a changed file that holds no certificate is logged and
	// the last good bundle kept. Empty: ClientCAs.
	ClientCAFile string
	// ClientCAs is ClientCAFile as a pool; set at most one of them. Both
	// empty: client certificates are not looked at.
	ClientCAs *x509.CertPool
	// TokenReviews checks bearer tokens (kubelet's
	// authentication.webhook). Nil: bearer tokens are not looked at.
	TokenReviews TokenReviewClient
	// Audiences are sent in each TokenReview and the reviewed token must
	// be for one of them. Empty (kubelet's way): none are sent and the
	// API server checks the token against its own audiences.
	Audiences []string
	// Anonymous lets requests with no credentials in as system:anonymous
	// in group system:unauthenticated (kubelet's
	// authentication.anonymous.enabled). Default false: they get 401.
	// Wrong credentials get 401 either way.
	Anonymous bool
	// SubjectAccessReviews authorizes requests (kubelet's Webhook
	// authorization mode). Required unless AlwaysAllow.
	SubjectAccessReviews SubjectAccessReviewClient
	// AlwaysAllow lets every authenticated request through (kubelet's
	// AlwaysAllow mode); SubjectAccessReviews must be nil.
	AlwaysAllow bool
	// UpgradeRequiresCreate authorizes a GET that upgrades its connection
	// (WebSocket or SPDY) to /exec, /attach or /portForward as create, as
	// the API server authorizes pods/exec, pods/attach and
	// pods/portforward since v1.35. Default false, kubelet v1.37's way:
	// such a GET needs get, so get on nodes/proxy runs commands in
	// containers once those paths are served.
	UpgradeRequiresCreate bool
	// AuthenticationCacheTTL is how long a TokenReview's answer, either
	// way, is reused for the same token. Default
	// DefaultAuthenticationCacheTTL (2m); negative: no cache; at most
	// MaxCacheTTL.
	AuthenticationCacheTTL time.Duration
	// AuthorizedCacheTTL is how long an allowed decision is reused.
	// Default DefaultAuthorizedCacheTTL (5m); negative: no cache; at most
	// MaxCacheTTL.
	AuthorizedCacheTTL time.Duration
	// UnauthorizedCacheTTL is how long a denied decision is reused.
	// Default DefaultUnauthorizedCacheTTL (30s); negative: no cache; at
	// most MaxCacheTTL.
	UnauthorizedCacheTTL time.Duration
	// CacheSize bounds the entries of each cache. Default
	// DefaultCacheSize (4096); at least 1.
	CacheSize int
	// ReviewTimeout bounds each review, its retries included. Default
	// DefaultReviewTimeout (10s); between MinReviewTimeout and
	// MaxReviewTimeout.
	ReviewTimeout time.Duration
	// ReviewRetries is how often a review that failed with a transient
	// error (connection reset or lost, 500, timeout, 429, or an answer
	// suggesting a delay) is retried, after ReviewRetryInitial (500ms)
	// growing 1.5 times each retry. Default DefaultReviewRetries (4);
	// negative: none; at most MaxReviewRetries.
	ReviewRetries int
	// Clock dates cache entries, checks certificate validity and paces
	// retries. Default clock.RealClock{}.
	Clock clock.Clock
}

func (o AuthOptions) withDefaults() (AuthOptions, error) {
	if o.NodeName == "" && o.NodeNameFrom == nil {
		return o, optcheck.Required("AuthOptions.NodeName")
	}
	if o.ClientCAFile != "" && o.ClientCAs != nil {
		return o, errors.New("AuthOptions: set ClientCAFile or ClientCAs, not both")
	}
	if o.ClientCAFile == "" && o.ClientCAs == nil && o.TokenReviews == nil && !o.Anonymous {
		return o, errors.New("AuthOptions: no way to authenticate (ClientCAFile, ClientCAs, TokenReviews or Anonymous)")
	}
	switch {
	case o.AlwaysAllow && o.SubjectAccessReviews != nil:
		return o, errors.New("AuthOptions: AlwaysAllow with SubjectAccessReviews")
	case !o.AlwaysAllow && o.SubjectAccessReviews == nil:
		return o, errors.New("AuthOptions.SubjectAccessReviews is required unless AlwaysAllow")
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"AuthenticationCacheTTL", &o.AuthenticationCacheTTL, DefaultAuthenticationCacheTTL},
		{"AuthorizedCacheTTL", &o.AuthorizedCacheTTL, DefaultAuthorizedCacheTTL},
		{"UnauthorizedCacheTTL", &o.UnauthorizedCacheTTL, DefaultUnauthorizedCacheTTL},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if err := optcheck.Max("AuthOptions."+f.name, *f.v, MaxCacheTTL); err != nil {
			return o, err
		}
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if err := optcheck.Min("AuthOptions.CacheSize", o.CacheSize, 1); err != nil {
		return o, err
	}
	if o.ReviewTimeout == 0 {
		o.ReviewTimeout = DefaultReviewTimeout
	}
	if err := optcheck.Range("AuthOptions.ReviewTimeout", o.ReviewTimeout, MinReviewTimeout, MaxReviewTimeout); err != nil {
		return o, err
	}
	switch {
	case o.ReviewRetries == 0:
		o.ReviewRetries = DefaultReviewRetries
	case o.ReviewRetries < 0:
		o.ReviewRetries = 0
	case o.ReviewRetries > MaxReviewRetries:
		return o, optcheck.Max("AuthOptions.ReviewRetries", o.ReviewRetries, MaxReviewRetries)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}

// User is who a request was authenticated as.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string

	key string // identity for the decision cache
}

func newUser(name, uid string, groups []string, extra map[string][]string) *User {
	u := &User{Name: name, UID: uid, Groups: groups, Extra: extra}
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte(0)
	b.WriteString(uid)
	for _, g := range groups {
		b.WriteByte(0)
		b.WriteString(g)
	}
	b.WriteByte(1)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		for _, v := range extra[k] {
			b.WriteByte(2)
			b.WriteString(v)
		}
	}
	u.key = b.String()
	return u
}

type userKey struct{}

// UserFrom returns the user an Auth-wrapped handler's request was
// authenticated as.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok
}

// Attribute subresources by path; shared, never modified.
var (
	subStats      = []string{"stats"}
	subMetrics    = []string{"metrics"}
	subLog        = []string{"log"}
	subCheckpoint = []string{"checkpoint"}
	subStatusz    = []string{"statusz"}
	subConfigz    = []string{"configz"}
	subProxy      = []string{"proxy"}
	subPods       = []string{"pods", "proxy"}
	subHealthz    = []string{"healthz", "proxy"}
	subConfigzP   = []string{"configz", "proxy"}
)

// isSubpath reports whether p is base or below it.
func isSubpath(p, base string) bool {
	base = strings.TrimSuffix(base, "/")
	return p == base || (strings.HasPrefix(p, base) && p[len(base)] == '/')
}

// Attributes returns what a request is authorized as, as kubelet v1.37
// maps it: the verb from the method (GET get, POST create, PUT update,
// PATCH patch, DELETE delete, any other method the empty verb, which RBAC
// never grants) and the subresources of nodes/<node> to try in order, the
// request being allowed when one of them is. The returned slice is shared:
// do not modify it.
//
//	/stats, /stats/*                 stats
//	/metrics, /metrics/*             metrics
//	/logs, /logs/*                   log
//	/checkpoint/*                    checkpoint
//	/statusz                         statusz
//	/flagz                           configz
//	/pods, /allocatedPods, /runningpods/   pods, then proxy
//	/healthz, /healthz/*             healthz, then proxy
//	/configz                         configz, then proxy
//	anything else (/containerLogs, /exec, /attach, /portForward, /run)  proxy
//
// A WebSocket upgrade is a GET and so needs get, as in kubelet: get on
// nodes/proxy lets a client exec through the WebSocket protocols.
func Attributes(method, path string) (verb string, subresources []string) {
	switch method {
	case http.MethodGet:
		verb = "get"
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	switch {
	case isSubpath(path, "/allocatedPods"), isSubpath(path, "/pods"), isSubpath(path, "/runningpods/"):
		return verb, subPods
	case isSubpath(path, "/healthz"):
		return verb, subHealthz
	case isSubpath(path, "/configz"):
		return verb, subConfigzP
	case isSubpath(path, "/stats/"):
		return verb, subStats
	case isSubpath(path, "/metrics"):
		return verb, subMetrics
	case isSubpath(path, "/logs/"):
		return verb, subLog
	case isSubpath(path, "/checkpoint/"):
		return verb, subCheckpoint
	case isSubpath(path, "/statusz"):
		return verb, subStatusz
	case isSubpath(path, "/flagz"):
		return verb, subConfigz
	}
	return verb, subProxy
}

// Auth authenticates and authorizes requests to the node API as kubelet
// does. Wrap puts it in front of a handler.
type Auth struct {
	opts AuthOptions
	// clientCAs returns the client CAs now (ClientCAFile's last good
	// content, or ClientCAs); nil: client certificates are not looked at.
	clientCAs func(context.Context) *x509.CertPool
	tokens    *ttlCache[[sha256.Size]byte, tokenResult]
	// decisions caches SubjectAccessReview answers.
	decisions *ttlCache[decisionKey, bool]
	anonymous *User
}

type tokenResult struct {
	user *User // nil: not authenticated
	err  string
}

type decisionKey struct {
	node, user, verb, subresource string
}

// nodeNameKey holds the node a request is for (AuthOptions.NodeNameFrom).
type nodeNameKey struct{}

// nodeName is the node ctx's request is for: the one NodeNameFrom named,
// else NodeName.
func (a *Auth) nodeName(ctx context.Context) string {
	if n, ok := ctx.Value(nodeNameKey{}).(string); ok {
		return n
	}
	return a.opts.NodeName
}

// NewAuth returns an Auth.
func NewAuth(opts AuthOptions) (*Auth, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("nodeapi: %w", err)
	}
	a := &Auth{
		opts:      opts,
		tokens:    newTTLCache[[sha256.Size]byte, tokenResult](opts.CacheSize),
		decisions: newTTLCache[decisionKey, bool](opts.CacheSize),
		anonymous: newUser(AnonymousUser, "", []string{UnauthenticatedGroup}, nil),
	}
	switch {
	case opts.ClientCAFile != "":
		file := opts.ClientCAFile
		r, err := newReloader("client CA bundle", opts.Clock, parseCABundle, file)
		if err != nil {
			return nil, fmt.Errorf("nodeapi: AuthOptions.ClientCAFile %s: %w", file, err)
		}
		a.clientCAs = r.current
	case opts.ClientCAs != nil:
		pool := opts.ClientCAs
		a.clientCAs = func(context.Context) *x509.CertPool { return pool }
	}
	return a, nil
}

// errUnauthenticated means credentials were given and not accepted.
var errUnauthenticated = errors.New("unauthorized")

// Authenticate returns the request's user: from a client certificate
// that verifies against the client CAs (CN, O), else from a bearer token
// (the Authorization header, or the WebSocket protocol
// base64url.bearer.authorization.k8s.io.<token>) that a TokenReview
// accepts, else system:anonymous when Anonymous is on. Credentials that
// are given and fail are an error even when Anonymous is on; so is a
// request with none when it is off.
func (a *Auth) Authenticate(r *http.Request) (*User, error) {
	var errs []error
	if a.clientCAs != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		u, err := a.authenticateCert(r, a.clientCAs(r.Context()))
		if err != nil {
			errs = append(errs, err)
		} else if u != nil {
			return u, nil
		}
	}
	if a.opts.TokenReviews != nil {
		if token, ok := bearerToken(r); ok {
			u, err := a.authenticateToken(r.Context(), token)
			if err != nil {
				errs = append(errs, err)
			} else {
				r.Header.Del("Authorization")
				return u, nil
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", errUnauthenticated, errors.Join(errs...))
	}
	if a.opts.Anonymous {
		return a.anonymous, nil
	}
	return nil, fmt.Errorf("%w: no credentials", errUnauthenticated)
}

const wsTokenPrefix = "base64url.bearer.authorization.k8s.io."

// bearerToken finds a bearer token in the Authorization header or, for a
// WebSocket upgrade, in its protocols.
func bearerToken(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
		if ok && strings.EqualFold(scheme, "bearer") {
			token = strings.TrimSpace(token)
			if token != "" && !strings.Contains(token, " ") {
				return token, true
			}
		}
		return "", false
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return "", false
	}
	for _, line := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(line, ",") {
			p = strings.TrimSpace(p)
			if enc, ok := strings.CutPrefix(p, wsTokenPrefix); ok {
				b, err := base64.RawURLEncoding.DecodeString(enc)
				if err != nil || len(b) == 0 {
					return "", false
				}
				return string(b), true
			}
		}
	}
	return "", false
}

func (a *Auth) authenticateToken(ctx context.Context, token string) (*User, error) {
	key := sha256.Sum256([]byte(token))
	now := a.opts.Clock.Now()
	res, ok := a.tokens.get(now, key)
	if !ok {
		var err error
		res, err = a.reviewToken(ctx, token)
		if err != nil {
			return nil, err
		}
		if a.opts.AuthenticationCacheTTL > 0 {
			a.tokens.put(now, key, res, a.opts.AuthenticationCacheTTL)
		}
	}
	if res.user == nil {
		if res.err != "" {
			return nil, fmt.Errorf("invalid bearer token: %s", res.err)
		}
		return nil, errors.New("invalid bearer token")
	}
	return res.user, nil
}

func (a *Auth) reviewToken(ctx context.Context, token string) (tokenResult, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.ReviewTimeout)
	defer cancel()
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.opts.Audiences}}
	var got *authenticationv1.TokenReview
	err := a.retry(ctx, func() (err error) {
		got, err = a.opts.TokenReviews.Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return tokenResult{}, fmt.Errorf("TokenReview: %w", err)
	}
	st := got.Status
	if !st.Authenticated {
		return tokenResult{err: st.Error}, nil
	}
	if len(a.opts.Audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(s string) bool { return slices.Contains(a.opts.Audiences, s) }) {
		return tokenResult{err: fmt.Sprintf("token audiences %q are not among %q", st.Audiences, a.opts.Audiences)}, nil
	}
	var extra map[string][]string
	if len(st.User.Extra) > 0 {
		extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			extra[k] = v
		}
	}
	return tokenResult{user: newUser(st.User.Username, st.User.UID, withAuthenticated(st.User.Groups), extra)}, nil
}

// withAuthenticated adds system:authenticated, as the API server's
// authenticator does for every authenticated user.
func withAuthenticated(groups []string) []string {
	if slices.Contains(groups, AuthenticatedGroup) || slices.Contains(groups, UnauthenticatedGroup) {
		return groups
	}
	return append(slices.Clip(groups), AuthenticatedGroup)
}

// connAuth holds one connection's verified client certificate, so that a
// connection's requests verify it once (again when the client CAs change).
type connAuth struct {
	mu       sync.Mutex
	roots    *x509.CertPool
	leaf     *x509.Certificate
	user     *User
	err      error
	notAfter time.Time
}

type connAuthKey struct{}

func (a *Auth) authenticateCert(r *http.Request, roots *x509.CertPool) (*User, error) {
	certs := r.TLS.PeerCertificates
	now := a.opts.Clock.Now()
	memo, _ := r.Context().Value(connAuthKey{}).(*connAuth)
	if memo != nil {
		memo.mu.Lock()
		defer memo.mu.Unlock()
		if memo.leaf == certs[0] && memo.roots == roots && (memo.err != nil || now.Before(memo.notAfter)) {
			return memo.user, memo.err
		}
	}
	u, notAfter, err := verifyCert(certs, roots, now)
	if memo != nil {
		memo.leaf, memo.roots, memo.user, memo.err, memo.notAfter = certs[0], roots, u, err, notAfter
	}
	return u, err
}

// verifyCert verifies a client's chain against roots at now: the user is
// the leaf's CN (none: not authenticated), the groups its O. notAfter is
// when the verified chain expires.
func verifyCert(certs []*x509.Certificate, roots *x509.CertPool, now time.Time) (*User, time.Time, error) {
	opts := x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("verifying certificate %q: %w", certs[0].Subject.CommonName, err)
	}
	notAfter := certs[0].NotAfter
	for _, c := range chains[0] {
		if c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	leaf := chains[0][0]
	if leaf.Subject.CommonName == "" {
		return nil, notAfter, nil
	}
	return newUser(leaf.Subject.CommonName, "", withAuthenticated(slices.Clone(leaf.Subject.Organization)), nil), notAfter, nil
}

// Decision is the answer to one authorization check.
type Decision int

// Decisions.
const (
	// Denied: the authorizer said no, or had no opinion.
	Denied Decision = iota
	Allowed
)

// Authorize asks whether user may verb nodes/<subresource> named the node,
// from the cache when a decision is there (allowed for
// AuthorizedCacheTTL, denied for UnauthorizedCacheTTL), else by a
// SubjectAccessReview. Review errors are not cached.
func (a *Auth) Authorize(ctx context.Context, u *User, verb, subresource string) (Decision, error) {
	if a.opts.AlwaysAllow {
		return Allowed, nil
	}
	node := a.nodeName(ctx)
	if node == "" {
		return Denied, errors.New("no node name: AuthOptions.NodeNameFrom is set and the context holds none (Authorize is called by Wrap)")
	}
	key := decisionKey{node: node, user: u.key, verb: verb, subresource: subresource}
	now := a.opts.Clock.Now()
	if allowed, ok := a.decisions.get(now, key); ok {
		return decision(allowed), nil
	}
	rctx, cancel := context.WithTimeout(ctx, a.opts.ReviewTimeout)
	defer cancel()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb:        verb,
			Version:     "v1",
			Resource:    "nodes",
			Subresource: subresource,
			Name:        node,
		},
		User:   u.Name,
		UID:    u.UID,
		Groups: u.Groups,
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	var got *authorizationv1.SubjectAccessReview
	err := a.retry(rctx, func() (err error) {
		got, err = a.opts.SubjectAccessReviews.Create(rctx, sar, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return Denied, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	allowed := got.Status.Allowed && !got.Status.Denied
	ttl := a.opts.UnauthorizedCacheTTL
	if allowed {
		ttl = a.opts.AuthorizedCacheTTL
	}
	if ttl > 0 {
		a.decisions.put(now, key, allowed, ttl)
	}
	return decision(allowed), nil
}

func decision(allowed bool) Decision {
	if allowed {
		return Allowed
	}
	return Denied
}

// Wrap returns a handler that authenticates each request (401
// "Unauthorized" when that fails), authorizes it as Attributes maps it
// (403 "Forbidden (user=…, verb=…, resource=nodes, subresource(s)=[…])"
// when no subresource is allowed, 500 when a review fails) and passes it
// to h with the user in its context (UserFrom), as kubelet's filter does.
// With AuthOptions.NodeNameFrom it first finds the request's node (404
// "no node at this address" when there is none).
func (a *Auth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		if a.opts.NodeNameFrom != nil {
			node, ok := a.opts.NodeNameFrom(r)
			if !ok {
				http.Error(w, "no node at this address", http.StatusNotFound)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), nodeNameKey{}, node))
		}
		u, err := a.Authenticate(r)
		if err != nil {
			logger.V(4).Info("Unauthenticated node API request", "path", r.URL.Path, "err", err)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb, subs := Attributes(r.Method, r.URL.Path)
		if a.opts.UpgradeRequiresCreate && verb == "get" && streamUpgrade(r) {
			verb = "create"
		}
		allowed := false
		for _, sub := range subs {
			d, err := a.Authorize(r.Context(), u, verb, sub)
			if err != nil {
				logger.Error(err, "Authorization error", "user", u.Name, "verb", verb, "resource", "nodes", "subresource", sub)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Name, verb, sub), http.StatusInternalServerError)
				return
			}
			if d == Allowed {
				allowed = true
				break
			}
		}
		if !allowed {
			logger.V(2).Info("Forbidden", "user", u.Name, "verb", verb, "resource", "nodes", "subresource(s)", subs)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprintf(w, "Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)\n", u.Name, verb, subs)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// retry calls call until it succeeds, fails with an error that is not
// transient, has been retried ReviewRetries times or ctx ends, waiting on
// the clock between calls.
func (a *Auth) retry(ctx context.Context, call func() error) error {
	wait := ReviewRetryInitial
	for attempt := 0; ; attempt++ {
		err := call()
		if err == nil || attempt >= a.opts.ReviewRetries || !transient(err) {
			return err
		}
		if !loop.Sleep(ctx, a.opts.Clock, wait) {
			return err
		}
		wait = wait * 3 / 2
	}
}

// transient reports whether a review's error is worth a retry, as the
// API server's webhook clients judge it.
func transient(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, delay := apierrors.SuggestsClientDelay(err)
	return delay
}

// streamUpgrade reports whether r upgrades its connection to a stream of
// /exec, /attach or /portForward.
func streamUpgrade(r *http.Request) bool {
	p := r.URL.Path
	if !isSubpath(p, "/exec") && !isSubpath(p, "/attach") && !isSubpath(p, "/portForward") {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// ttlCache is a map of entries that expire, of at most max entries: a
// full cache first drops what has expired, then an arbitrary entry.
type ttlCache[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]ttlEntry[V]
	max int
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[K comparable, V any](max int) *ttlCache[K, V] {
	return &ttlCache[K, V]{m: make(map[K]ttlEntry[V]), max: max}
}

func (c *ttlCache[K, V]) get(now time.Time, k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[K, V]) put(now time.Time, k K, v V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for k2, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k2)
			}
		}
		for k2 := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, k2)
		}
	}
	c.m[k] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}
