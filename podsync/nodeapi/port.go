package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/hostip"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/podsync"
)

// PodLister is what the port serves of a pod half (a *nodekit.PodHalf):
// its pods, and what the last relist saw of each.
type PodLister interface {
	Pods(ctx context.Context) []*corev1.Pod
	PodState(uid types.UID) *podsync.PodState
}

// PortOptions configure NewPort. The zero value of each field means its
// default.
type PortOptions struct {
	// NodeName is the node's name: requests are authorized against it and
	// it names the serving certificate. Required.
	NodeName string
	// Listener is the port (the kubelet's --address and --port). Required;
	// closed when Run returns.
	Listener net.Listener
	// Pods are the pods served: /pods, and the containers that
	// /containerLogs, /exec, /attach and /portForward reach. Default nil:
	// no pods.
	Pods PodLister
	// Handler holds the handler's other options (Stats, Runtime, Metrics,
	// PodLogRoot). Pods, Container and Sandbox are set from Pods, Clock and
	// Registerer from these options.
	Handler Options
	// Server holds the TLS server's other options (Auth, the certificate
	// files, CertDir, IPs). Handler and Clock are set by NewPort;
	// Auth.NodeName and Hostnames default to NodeName.
	Server ServerOptions
	// ServingCertificates, when set, requests the serving certificate from
	// the API server as the kubelet's serverTLSBootstrap does, keeps it in
	// Server.CertDir (required then) and serves it once issued. Its
	// NodeName and Hostnames default to NodeName, IPs to Server.IPs or the
	// default-route address, and Clock to Clock; CSRs is required. Default
	// nil: the certificate files or a self-signed certificate (Server).
	ServingCertificates *ServingCSROptions
	// Clock drives the server and the certificate requests. Default
	// clock.RealClock{}.
	Clock clock.WithTicker
	// Registerer receives the handler's metrics. Default nil: none.
	Registerer prometheus.Registerer
}

// Port is the kubelet's port for an agent: the Handler behind its
// authenticating Server, and the serving certificate's requests when asked
// for.
type Port struct {
	server   *Server
	listener net.Listener
	certs    *ServingCertificates // nil: not requested
}

// NewPort builds the port. It makes no request and serves nothing until
// Run.
func NewPort(o PortOptions) (*Port, error) {
	switch {
	case o.NodeName == "":
		return nil, optcheck.Required("nodeapi: PortOptions.NodeName")
	case o.Listener == nil:
		return nil, optcheck.Required("nodeapi: PortOptions.Listener")
	case o.ServingCertificates != nil && o.Server.CertDir == "":
		return nil, errors.New("nodeapi: PortOptions.ServingCertificates needs Server.CertDir")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	ho := o.Handler
	ho.Clock, ho.Registerer = o.Clock, o.Registerer
	if o.Pods != nil {
		states := PodStates{Pods: o.Pods.Pods, State: o.Pods.PodState}
		ho.Pods, ho.Container, ho.Sandbox = o.Pods.Pods, states.Container, states.Sandbox
	}
	h, err := New(ho)
	if err != nil {
		return nil, err
	}
	so := o.Server
	so.Handler, so.Clock = h, o.Clock
	if so.Auth.NodeName == "" {
		so.Auth.NodeName = o.NodeName
	}
	if len(so.Hostnames) == 0 {
		so.Hostnames = []string{o.NodeName}
	}
	p := &Port{listener: o.Listener}
	if o.ServingCertificates != nil {
		co := *o.ServingCertificates
		if co.NodeName == "" {
			co.NodeName = o.NodeName
		}
		if len(co.Hostnames) == 0 {
			co.Hostnames = []string{o.NodeName}
		}
		if co.IPs == nil {
			co.IPs = so.IPs
		}
		if ip := hostip.DefaultRoute(); co.IPs == nil && ip != nil {
			co.IPs = []net.IP{ip}
		}
		if co.Clock == nil {
			co.Clock = o.Clock
		}
		if p.certs, err = NewServingCertificates(co, so.CertDir); err != nil {
			return nil, fmt.Errorf("nodeapi: PortOptions.ServingCertificates: %w", err)
		}
		so.Certificate = p.certs.Current
	}
	if p.server, err = NewServer(so); err != nil {
		return nil, err
	}
	return p, nil
}

// Run serves until ctx ends, requesting and renewing the serving
// certificate meanwhile when asked to. It returns the server's error, or
// the certificate requests' when they fail first.
func (p *Port) Run(ctx context.Context) error {
	if p.certs == nil {
		return p.server.Run(ctx, p.listener)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var certErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if certErr = p.certs.Run(ctx); ctx.Err() != nil {
			certErr = nil // stopped with the server
			return
		} else if certErr == nil {
			certErr = errors.New("requests stopped")
		}
		cancel() // failed while serving: stop the server too
	}()
	err := p.server.Run(ctx, p.listener)
	cancel()
	wg.Wait()
	if certErr != nil {
		return fmt.Errorf("serving certificate: %w", certErr)
	}
	return err
}
