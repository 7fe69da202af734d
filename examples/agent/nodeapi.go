package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubeclient "github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// The small client's review clients are the node API's.
var (
	_ nodeapi.TokenReviewInterface         = (*kubeclient.TokenReviewResource)(nil)
	_ nodeapi.SubjectAccessReviewInterface = (*kubeclient.SubjectAccessReviewResource)(nil)
)

// newNodeAPI adds kubelet's port to the agent: podsync/nodeapi's handler
// (/stats/summary and /metrics/resource from the pod half's usage
// collector, /pods, /containerLogs, /healthz, and /exec, /attach,
// /portForward and /run proxied to the runtime's streaming server) behind
// its Server: TLS with
// the given or a self-signed certificate, client certificates against
// --client-ca-file, bearer tokens through TokenReview, and authorization by
// SubjectAccessReview as the node (or AlwaysAllow). It binds the port now,
// so that a busy port is an error at start.
func (a *agent) newNodeAPI(cfg *config, clk clock.WithTicker) error {
	ho := nodeapi.Options{PodLogRoot: cfg.podLogRoot, Clock: clk,
		Metrics: a.metricsHandler(), Registerer: a.registry}
	if a.pods != nil {
		ps := nodeapi.PodStates{Pods: a.pods.runningPods, State: a.pods.podState}
		ho.Stats, ho.Pods = a.pods, a.pods.runningPods
		ho.Runtime, ho.Container, ho.Sandbox = a.runtime, ps.Container, ps.Sandbox
	}
	h, err := nodeapi.New(ho)
	if err != nil {
		return err
	}
	auth := nodeapi.AuthOptions{NodeName: a.name, ClientCAFile: cfg.clientCAFile, Anonymous: cfg.anonymousAuth}
	if cfg.tokenWebhook && a.client != nil {
		auth.TokenReviews = a.client.TokenReviews()
	}
	if cfg.authzMode == authzWebhook {
		auth.SubjectAccessReviews = a.client.SubjectAccessReviews()
		auth.AuthorizedCacheTTL, auth.UnauthorizedCacheTTL = cacheTTL(cfg.authzAllowedTTL), cacheTTL(cfg.authzDeniedTTL)
	} else {
		auth.AlwaysAllow = true
	}
	so := nodeapi.ServerOptions{
		Handler: h, Auth: auth,
		CertFile: cfg.tlsCertFile, KeyFile: cfg.tlsKeyFile, CertDir: cfg.certDir,
		Hostnames: []string{a.name}, IPs: cfg.nodeIPs, Clock: clk,
	}
	if cfg.serverTLS {
		if so.Certificate, err = a.bootstrapServing(cfg, clk); err != nil {
			return fmt.Errorf("--rotate-server-certificates: %w", err)
		}
	}
	srv, err := nodeapi.NewServer(so)
	if err != nil {
		return fmt.Errorf("node API: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.address.String(), strconv.Itoa(cfg.port)))
	if err != nil {
		return fmt.Errorf("--port: %w", err)
	}
	a.nodeAPI = ln
	a.components = append(a.components, component{name: "node API", run: func(ctx context.Context) error {
		return srv.Run(ctx, ln)
	}})
	return nil
}

// cacheTTL maps a flag's cache TTL (0: not kept) to nodeapi's (negative:
// not kept; 0 is the default).
func cacheTTL(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// Latest is the pod half's last usage sample (nodeapi.Stats), nil until
// its collector has taken one.
func (p *podHalf) Latest() *usage.Snapshot {
	if c := p.usage.Load(); c != nil {
		return c.Latest()
	}
	return nil
}

// podState is what the engine's last relist saw of a pod (for /exec,
// /attach, /portForward and /run), nil before the engine runs.
func (p *podHalf) podState(uid types.UID) *podsync.PodState {
	if e := p.engine.Load(); e != nil {
		return e.State(uid)
	}
	return nil
}

// runningPods are the pods the sources want on the node, for /pods and
// /containerLogs (a pod's log directory has its UID).
func (p *podHalf) runningPods(context.Context) []*corev1.Pod { return p.merger.Pods() }
