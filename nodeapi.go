package nodekit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// NodeAPIOptions configure NewNodeAPI. The zero value of each field means
// its default.
type NodeAPIOptions struct {
	// NodeName is the node's name: requests are authorized against it and
	// it names the serving certificate. Required.
	NodeName string
	// Listener is the node API's port (the kubelet's --address and
	// --port). Required; closed when Run returns.
	Listener net.Listener
	// Pods is the pod half served: /pods, and the containers that
	// /containerLogs, /exec, /attach and /portForward reach. Default nil:
	// no pods.
	Pods *PodHalf
	// Handler holds the handler's other options (Stats, Runtime, Metrics,
	// PodLogRoot). Pods, Container and Sandbox are set from Pods, Clock and
	// Registerer from these options.
	Handler nodeapi.Options
	// Server holds the TLS server's other options (Auth, the certificate
	// files, CertDir, IPs). Handler and Clock are set by NewNodeAPI;
	// Auth.NodeName and Hostnames default to NodeName.
	Server nodeapi.ServerOptions
	// ServingCertificates, when set, requests the serving certificate from
	// the API server as the kubelet's serverTLSBootstrap does, keeps it in
	// Server.CertDir (required then) and serves it once issued. Its
	// NodeName and Hostnames default to NodeName, IPs to Server.IPs or
	// DefaultHostIPs, and Clock to Clock; CSRs is required. Default nil:
	// the certificate files or a self-signed certificate (Server).
	ServingCertificates *nodeapi.ServingCSROptions
	// Clock drives the server and the certificate requests. Default
	// clock.RealClock{}.
	Clock clock.WithTicker
	// Registerer receives the handler's metrics. Default nil: none.
	Registerer prometheus.Registerer
}

// NodeAPI is the kubelet's port for an agent: podsync/nodeapi's handler
// behind its authenticating Server, and the serving certificate's
// requests when asked for.
type NodeAPI struct {
	group Group
}

// NewNodeAPI builds the node API. It makes no request and serves nothing
// until Run.
func NewNodeAPI(o NodeAPIOptions) (*NodeAPI, error) {
	switch {
	case o.NodeName == "":
		return nil, optcheck.Required("nodekit: NodeAPIOptions.NodeName")
	case o.Listener == nil:
		return nil, optcheck.Required("nodekit: NodeAPIOptions.Listener")
	case o.ServingCertificates != nil && o.Server.CertDir == "":
		return nil, errors.New("nodekit: NodeAPIOptions.ServingCertificates needs Server.CertDir")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	ho := o.Handler
	ho.Clock, ho.Registerer = o.Clock, o.Registerer
	if o.Pods != nil {
		states := nodeapi.PodStates{Pods: o.Pods.Pods, State: o.Pods.PodState}
		ho.Pods, ho.Container, ho.Sandbox = o.Pods.Pods, states.Container, states.Sandbox
	}
	h, err := nodeapi.New(ho)
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
	n := &NodeAPI{}
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
		if co.IPs == nil {
			for _, ip := range DefaultHostIPs() {
				co.IPs = append(co.IPs, net.ParseIP(ip))
			}
		}
		if co.Clock == nil {
			co.Clock = o.Clock
		}
		certs, err := nodeapi.NewServingCertificates(co, so.CertDir)
		if err != nil {
			return nil, fmt.Errorf("nodekit: NodeAPIOptions.ServingCertificates: %w", err)
		}
		so.Certificate = certs.Current
		_ = n.group.Add("serving certificate", certs)
	}
	srv, err := nodeapi.NewServer(so)
	if err != nil {
		return nil, err
	}
	_ = n.group.Add("server", RunnableFunc(func(ctx context.Context) error { return srv.Run(ctx, o.Listener) }))
	return n, nil
}

// Run serves until ctx ends, requesting and renewing the serving
// certificate when asked to.
func (n *NodeAPI) Run(ctx context.Context) error { return n.group.Run(ctx) }

// NodeName is the name a node registers under, as the kubelet chooses it:
// override (its --hostname-override) when given, else the host's name,
// trimmed and lower-cased. It must be a DNS-1123 subdomain.
func NodeName(override string) (string, error) {
	name := override
	if name == "" {
		var err error
		if name, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("nodekit: host name: %w", err)
		}
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("nodekit: node name %q: %s", name, strings.Join(errs, "; "))
	}
	return name, nil
}
