package fleetapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// Options configure New. The zero value of each field means its default.
type Options struct {
	// Node returns node n's node API options beyond its pods: the
	// simulated usage (Stats) and logs (Logs) of its containers, which
	// podsync/podsynctest/simapi serves from the node's simulated backend.
	// pods lists the node's pods (its pod half's Pods); Options.Pods is
	// set to it when Node leaves it nil. Registerer is not used (every
	// node would register the same metrics). Required.
	Node func(n fleet.PodNode, pods func(context.Context) []*corev1.Pod) (nodeapi.Options, error)
	// Auth authenticates and authorizes every node's requests, as
	// kubelet's (nodeapi.AuthOptions: a client CA, TokenReviews,
	// SubjectAccessReviews); NodeName and NodeNameFrom are the fleet's:
	// a request is checked against the node whose address it came to.
	Auth nodeapi.AuthOptions
	// Port is the port of the listener Serve serves, reported as
	// every node's daemonEndpoints.kubeletEndpoint. Default
	// nodeapi.DefaultPort (10250).
	Port int
	// Address returns the address of the node numbered i (the number in
	// its name), reported as its InternalIP, where its node API is
	// served: an address the listener takes connections on. Default
	// Address: 127.64.0.1 and on, which are local on Linux (all
	// of 127.0.0.0/8 is), so a listener on all addresses takes them.
	Address func(i int) (netip.Addr, error)
	// Clock dates the self-signed certificate and the authorization
	// caches, and is each node's nodeapi.Options.Clock where Node leaves
	// it nil. Default clock.RealClock{}.
	Clock clock.WithTicker
}

// Address is Options.Address's default: the node
// numbered i is at 127.64.0.1 + i, up to 127.255.255.254.
func Address(i int) (netip.Addr, error) {
	const first = 127<<24 | 64<<16 | 1
	if i < 0 || i > 0x7FFFFFFE-first {
		return netip.Addr{}, fmt.Errorf("fleetapi: Address: node %d has no address in 127.64.0.1 - 127.255.255.254", i)
	}
	v := uint32(first + i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// fleetAPI is one node's node API.
type fleetAPI struct {
	name    string
	handler http.Handler
}

// Server serves every added node's node API.
type Server struct {
	o Options

	mu    sync.Mutex
	apis  map[netip.Addr]fleetAPI // by address
	addrs map[int]netip.Addr      // node number -> address
}

// New checks o.
func New(o Options) (*Server, error) {
	if o.Node == nil {
		return nil, errors.New("fleetapi: Options.Node is required")
	}
	if o.Auth.NodeName != "" || o.Auth.NodeNameFrom != nil {
		return nil, errors.New("fleetapi: Options.Auth: NodeName and NodeNameFrom are the fleet's; leave them empty")
	}
	if o.Port == 0 {
		o.Port = nodeapi.DefaultPort
	}
	if o.Port < 1 || o.Port > 65535 {
		return nil, fmt.Errorf("fleetapi: Options.Port %d: want 1 to 65535", o.Port)
	}
	if o.Address == nil {
		o.Address = Address
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Server{o: o, apis: map[netip.Addr]fleetAPI{}, addrs: map[int]netip.Addr{}}, nil
}

// Add builds node n's node API, serving pods (its pod half's Pods), and
// files it under its address: nodekit.FleetPodsOptions.OnNode, as
// func(n, half) error { return s.Add(n, half.Pods) }.
func (s *Server) Add(n fleet.PodNode, pods func(context.Context) []*corev1.Pod) error {
	o := s.o
	addr, err := o.Address(n.Index)
	if err != nil {
		return err
	}
	addr = addr.Unmap()
	ho, err := o.Node(n, pods)
	if err != nil {
		return fmt.Errorf("fleetapi: node %s: Options.Node: %w", n.Name, err)
	}
	if ho.Pods == nil {
		ho.Pods = pods
	}
	ho.Registerer = nil
	if ho.Clock == nil {
		ho.Clock = o.Clock
	}
	h, err := nodeapi.New(ho)
	if err != nil {
		return fmt.Errorf("fleetapi: node %s: %w", n.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other, ok := s.apis[addr]; ok && other.name != n.Name {
		return fmt.Errorf("fleetapi: node %s: Options.Address: %v is node %s's too", n.Name, addr, other.name)
	}
	s.apis[addr] = fleetAPI{name: n.Name, handler: h}
	s.addrs[n.Index] = addr
	return nil
}

// apiFor finds the node API a request came to by its connection's local
// address.
func (s *Server) apiFor(r *http.Request) (fleetAPI, bool) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	tcp, ok := local.(*net.TCPAddr)
	if !ok {
		return fleetAPI{}, false
	}
	addr, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return fleetAPI{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	api, ok := s.apis[addr.Unmap()]
	return api, ok
}

// Setters is fleet.Options.Setters for a fleet whose nodes serve their node
// API: node i reports its address as its InternalIP beside its Hostname
// (its name), and Options.Port as its kubelet endpoint.
func (s *Server) Setters(i int, setters nodestatus.Setters) nodestatus.Setters {
	o := s.o
	out := append(nodestatus.Setters(nil), setters...)
	address := nodestatus.StatusSetterFunc(func(_ context.Context, node *corev1.Node) error {
		s.mu.Lock()
		addr, ok := s.addrs[i]
		s.mu.Unlock()
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
		name   string
		setter nodestatus.StatusSetter
	}{{nodestatus.SetterNodeAddress, address}, {nodestatus.SetterDaemonEndpoints, port}} {
		if k := out.Index(set.name); k >= 0 {
			out[k].StatusSetter = set.setter
		} else {
			out = append(out, nodestatus.Named{Name: set.name, StatusSetter: set.setter})
		}
	}
	return out
}

// Serve serves every added node's node API on ln until ctx ends: TLS with
// a self-signed certificate (as a kubelet without a serving certificate
// has; clients that verify it need it as a CA), authenticated and
// authorized as Options.Auth says for the node whose address a connection
// came to, 404 "no node at this address" for an address with no node. ln
// must take connections on every node's address on Options.Port: listen
// on all addresses (":10250"). It returns an error at once when ln's port
// is not Options.Port.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	o := s.o
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || tcp.Port != o.Port {
		return fmt.Errorf("fleetapi: Serve: listener on %v, want port %d (Options.Port)", ln.Addr(), o.Port)
	}
	auth := o.Auth
	auth.NodeNameFrom = func(r *http.Request) (string, bool) {
		api, ok := s.apiFor(r)
		return api.name, ok
	}
	if auth.Clock == nil {
		auth.Clock = o.Clock
	}
	srv, err := nodeapi.NewServer(nodeapi.ServerOptions{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if api, ok := s.apiFor(r); ok {
				api.handler.ServeHTTP(w, r)
				return
			}
			http.Error(w, "no node at this address", http.StatusNotFound)
		}),
		Auth:      auth,
		Hostnames: []string{"nodekit-fleet"},
		IPs:       []net.IP{},
		Clock:     o.Clock,
	})
	if err != nil {
		return fmt.Errorf("fleetapi: Serve: %w", err)
	}
	return srv.Run(ctx, ln)
}
