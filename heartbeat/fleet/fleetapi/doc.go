// Package fleetapi serves kubelet's node API (podsync/nodeapi) for every
// node of a heartbeat/fleet at an address of its own, all on one listener:
// a connection's local address says which node it is for. Every node is
// authenticated and authorized as kubelet is, against its own name, so
// that metrics-server scrapes each hollow node and kubectl logs reaches it
// through the API server. The addresses default to 127.64.0.1 and on
// (Address), which are local on Linux: all of 127.0.0.0/8 is.
//
// With nodekit.FleetPods: give Server.Add as FleetPodsOptions.OnNode,
// Server.Setters as fleet.Options.Setters (each node reports its address
// and port) and run Server.Serve on a listener on all addresses;
// podsync/podsynctest/simapi serves each node's simulated usage and logs.
package fleetapi
