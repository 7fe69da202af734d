package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/podsync/nodeapi"
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
		ps := nodeapi.PodStates{Pods: a.pods.Pods, State: a.pods.PodState}
		ho.Stats, ho.Pods = a.backend.Usage(), a.pods.Pods
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
	if cfg.serverTLS { // kubelet's serverTLSBootstrap
		if a.client == nil {
			return errors.New("--rotate-server-certificates: needs --kubeconfig")
		}
		certs, err := nodeapi.NewServingCertificates(nodeapi.ServingCSROptions{CSRs: a.client.CertificateSigningRequests(),
			NodeName: a.name, Hostnames: []string{a.name}, IPs: servingIPs(cfg), Clock: clk}, cfg.certDir)
		if err != nil {
			return fmt.Errorf("--rotate-server-certificates: %w", err)
		}
		so.Certificate = certs.Current
		if err := a.group.Add("serving certificate", certs); err != nil {
			return err
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
	return a.group.Add("node API", nodekit.RunnableFunc(func(ctx context.Context) error { return srv.Run(ctx, ln) }))
}

// cacheTTL maps a flag's cache TTL (0: not kept) to nodeapi's (negative:
// not kept; 0 is the default).
func cacheTTL(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// servingIPs are the addresses the serving certificate is requested for:
// --node-ip, else the default-route address.
func servingIPs(cfg *config) []net.IP {
	if len(cfg.nodeIPs) > 0 {
		return cfg.nodeIPs
	}
	var ips []net.IP
	for _, ip := range nodekit.DefaultHostIPs() {
		ips = append(ips, net.ParseIP(ip))
	}
	return ips
}
