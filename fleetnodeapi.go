package nodekit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// FleetNodeAPIOptions configure FleetPodsOptions.NodeAPI: every hollow node
// serves kubelet's node API (podsync/nodeapi) at an address of its own, so
// that metrics-server scrapes each node and kubectl logs reaches it
// through the API server. One listener serves every node: a connection's
// local address says which node it is for.
type FleetNodeAPIOptions struct {
	// Node returns node n's node API options beyond its pods: the
	// simulated usage (Stats) and logs (Logs) of its containers, which
	// podsync/podsynctest's NodeAPI serves from the node's simulated
	// backend. Options.Pods is filled in with the node's pod half's Pods
	// when Node leaves it nil; Registerer is not used (every node would
	// register the same metrics). Required.
	Node func(n fleet.PodNode, half *PodHalf) (nodeapi.Options, error)
	// Auth authenticates and authorizes every node's requests, as
	// kubelet's (nodeapi.AuthOptions: a client CA, TokenReviews,
	// SubjectAccessReviews); NodeName and NodeNameFrom are the fleet's:
	// a request is checked against the node whose address it came to.
	Auth nodeapi.AuthOptions
	// Port is the port of the listener ServeNodeAPI serves, reported as
	// every node's daemonEndpoints.kubeletEndpoint. Default
	// nodeapi.DefaultPort (10250).
	Port int
	// Address returns the address of the node numbered i (the number in
	// its name), reported as its InternalIP, where its node API is
	// served: an address the listener takes connections on. Default
	// FleetNodeAddress: 127.64.0.1 and on, which are local on Linux (all
	// of 127.0.0.0/8 is), so a listener on all addresses takes them.
	Address func(i int) (netip.Addr, error)
}

// FleetNodeAddress is FleetNodeAPIOptions.Address's default: the node
// numbered i is at 127.64.0.1 + i, up to 127.255.255.254.
func FleetNodeAddress(i int) (netip.Addr, error) {
	const first = 127<<24 | 64<<16 | 1
	if i < 0 || i > 0x7FFFFFFE-first {
		return netip.Addr{}, fmt.Errorf("nodekit: FleetNodeAddress: node %d has no address in 127.64.0.1 - 127.255.255.254", i)
	}
	v := uint32(first + i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// fleetAPI is one node's node API.
type fleetAPI struct {
	name    string
	handler http.Handler
}

func (o *FleetNodeAPIOptions) withDefaults() error {
	if o.Node == nil {
		return errors.New("nodekit: FleetPodsOptions.NodeAPI.Node is required")
	}
	if o.Auth.NodeName != "" || o.Auth.NodeNameFrom != nil {
		return errors.New("nodekit: FleetPodsOptions.NodeAPI.Auth: NodeName and NodeNameFrom are the fleet's; leave them empty")
	}
	if o.Port == 0 {
		o.Port = nodeapi.DefaultPort
	}
	if o.Port < 1 || o.Port > 65535 {
		return fmt.Errorf("nodekit: FleetPodsOptions.NodeAPI.Port %d: want 1 to 65535", o.Port)
	}
	if o.Address == nil {
		o.Address = FleetNodeAddress
	}
	return nil
}

// nodeAPI builds node n's node API and files it under its address.
func (p *FleetPods) nodeAPI(n fleet.PodNode, half *PodHalf) error {
	o := p.o.NodeAPI
	addr, err := o.Address(n.Index)
	if err != nil {
		return err
	}
	addr = addr.Unmap()
	ho, err := o.Node(n, half)
	if err != nil {
		return fmt.Errorf("NodeAPI.Node: %w", err)
	}
	if ho.Pods == nil {
		ho.Pods = half.Pods
	}
	ho.Registerer = nil
	if ho.Clock == nil {
		ho.Clock = p.o.Clock
	}
	h, err := nodeapi.New(ho)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if other, ok := p.apis[addr]; ok && other.name != n.Name {
		return fmt.Errorf("NodeAPI.Address: %v is node %s's too", addr, other.name)
	}
	p.apis[addr] = fleetAPI{name: n.Name, handler: h}
	p.addrs[n.Index] = addr
	return nil
}

// apiFor finds the node API a request came to by its connection's local
// address.
func (p *FleetPods) apiFor(r *http.Request) (fleetAPI, bool) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	tcp, ok := local.(*net.TCPAddr)
	if !ok {
		return fleetAPI{}, false
	}
	addr, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return fleetAPI{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	api, ok := p.apis[addr.Unmap()]
	return api, ok
}

// Setters is fleet.Options.Setters for a fleet whose nodes serve their node
// API (FleetPodsOptions.NodeAPI): node i reports its address as its
// InternalIP beside its Hostname (its name), and NodeAPI.Port as its
// kubelet endpoint. Without NodeAPI it returns s unchanged.
func (p *FleetPods) Setters(i int, s nodestatus.Setters) nodestatus.Setters {
	o := p.o.NodeAPI
	if o == nil {
		return s
	}
	out := append(nodestatus.Setters(nil), s...)
	address := nodestatus.StatusSetterFunc(func(_ context.Context, node *corev1.Node) error {
		p.mu.Lock()
		addr, ok := p.addrs[i]
		p.mu.Unlock()
		if !ok {
			return fmt.Errorf("node %d has no node API address", i)
		}
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: addr.String()},
			{Type: corev1.NodeHostName, Address: node.Name},
		}
		return nil
	})
	port := nodestatus.StatusSetterFunc(func(_ context.Context, node *corev1.Node) error {
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(o.Port)
		return nil
	})
	for _, set := range []struct {
		name string
		s    nodestatus.StatusSetter
	}{{nodestatus.SetterNodeAddress, address}, {nodestatus.SetterDaemonEndpoints, port}} {
		if k := out.Index(set.name); k >= 0 {
			out[k].StatusSetter = set.s
		} else {
			out = append(out, nodestatus.Named{Name: set.name, StatusSetter: set.s})
		}
	}
	return out
}

// ServeNodeAPI serves every node's node API on ln until ctx ends: TLS with
// a self-signed certificate (as a kubelet without a serving certificate
// has; clients that verify it need it as a CA), authenticated and
// authorized as NodeAPI.Auth says for the node whose address a connection
// came to, 404 "no node at this address" for an address with no node. ln
// must take connections on every node's address on NodeAPI.Port: listen on
// all addresses (":10250"). It returns an error at once without
// FleetPodsOptions.NodeAPI or when ln's port is not NodeAPI.Port.
func (p *FleetPods) ServeNodeAPI(ctx context.Context, ln net.Listener) error {
	o := p.o.NodeAPI
	if o == nil {
		return errors.New("nodekit: FleetPods.ServeNodeAPI: FleetPodsOptions.NodeAPI is not set")
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || tcp.Port != o.Port {
		return fmt.Errorf("nodekit: FleetPods.ServeNodeAPI: listener on %v, want port %d (NodeAPI.Port)", ln.Addr(), o.Port)
	}
	auth := o.Auth
	auth.NodeNameFrom = func(r *http.Request) (string, bool) {
		api, ok := p.apiFor(r)
		return api.name, ok
	}
	if auth.Clock == nil {
		auth.Clock = p.o.Clock
	}
	srv, err := nodeapi.NewServer(nodeapi.ServerOptions{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if api, ok := p.apiFor(r); ok {
				api.handler.ServeHTTP(w, r)
				return
			}
			http.Error(w, "no node at this address", http.StatusNotFound)
		}),
		Auth:      auth,
		Hostnames: []string{"nodekit-fleet"},
		IPs:       []net.IP{},
		Clock:     p.o.Clock,
	})
	if err != nil {
		return fmt.Errorf("nodekit: FleetPods.ServeNodeAPI: %w", err)
	}
	return srv.Run(ctx, ln)
}
