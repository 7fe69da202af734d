package volume

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Token refresh, as the kubelet's token manager: a token is requested again
// once 80% of its lifetime has passed or it is 24h old, less a jitter of up
// to 10s so many pods do not refresh in the same second.
const (
	tokenMaxTTL    = 24 * time.Hour
	tokenMaxJitter = 10 * time.Second
	// tokenRefreshShare is the share of a token's lifetime left when it is
	// refreshed.
	tokenRefreshShare = 20
)

type tokenKey struct {
	namespace, serviceAccount string
	audiences                 string
	expirationSeconds         int64
	podName                   string
	podUID                    types.UID
}

// tokens requests service-account tokens bound to pods through the
// TokenRequest API (serviceaccounts/token, as the node) and caches them
// until they need a refresh.
type tokens struct {
	client func(namespace string) ServiceAccountClient
	clock  clock.PassiveClock
	jitter func() time.Duration

	mu    sync.Mutex
	cache map[tokenKey]*authenticationv1.TokenRequest
}

func newTokens(client func(namespace string) ServiceAccountClient, clk clock.PassiveClock, r func() float64) *tokens {
	return &tokens{client: client, clock: clk, cache: map[tokenKey]*authenticationv1.TokenRequest{},
		jitter: func() time.Duration {
			return time.Duration(r()*float64(tokenMaxJitter/time.Second+1)) * time.Second
		}}
}

// refreshAt is when tr needs a refresh (jitter not applied).
func refreshAt(tr *authenticationv1.TokenRequest) time.Time {
	exp := tr.Status.ExpirationTimestamp.Time
	if tr.Spec.ExpirationSeconds == nil {
		return exp
	}
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-ttl)
	byShare := exp.Add(-ttl * tokenRefreshShare / 100)
	byAge := issued.Add(tokenMaxTTL)
	if byAge.Before(byShare) {
		return byAge
	}
	return byShare
}

func (t *tokens) needsRefresh(tr *authenticationv1.TokenRequest, jitter time.Duration) bool {
	return !t.clock.Now().Before(refreshAt(tr).Add(-jitter))
}

// get returns a token for the pod's projection, from the cache while it is
// fresh, else a new one. A refresh that fails while the cached token is
// still valid returns the cached one.
func (t *tokens) get(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) (*authenticationv1.TokenRequest, error) {
	if t.client == nil {
		return nil, fmt.Errorf("no API client to request a token for service account %s/%s", pod.Namespace, pod.Spec.ServiceAccountName)
	}
	exp := int64(3600)
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	var auds []string
	if p.Audience != "" {
		auds = []string{p.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	key := tokenKey{namespace: pod.Namespace, serviceAccount: sa, audiences: strings.Join(auds, ","), expirationSeconds: exp, podName: pod.Name, podUID: pod.UID}
	t.mu.Lock()
	cached := t.cache[key]
	t.mu.Unlock()
	if cached != nil && !t.needsRefresh(cached, t.jitter()) {
		return cached, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         auds,
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	tr, err := t.client(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		if cached != nil && t.clock.Now().Before(cached.Status.ExpirationTimestamp.Time) {
			return cached, nil
		}
		return nil, fmt.Errorf("failed to fetch token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = &exp
	}
	t.mu.Lock()
	t.cache[key] = tr
	t.mu.Unlock()
	return tr, nil
}

// next returns when the first cached token of pod needs a refresh (zero
// time: none cached).
func (t *tokens) next(pod types.UID) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for k, tr := range t.cache {
		if k.podUID != pod {
			continue
		}
		if at := refreshAt(tr); first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// forget drops the pod's tokens.
func (t *tokens) forget(pod types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cache {
		if k.podUID == pod {
			delete(t.cache, k)
		}
	}
}
