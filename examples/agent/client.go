package main

import (
	"fmt"
	"net"
	"time"

	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"github.com/nodekit/nodekit/heartbeat"
)

// nodeClientset serves only the API groups a node agent uses: core/v1
// (nodes, pods, events) and coordination.k8s.io/v1 (leases). It is a
// heartbeat.Client (and a lease.Client), not a kubernetes.Interface, so no
// other group can be reached by mistake.
//
// It exists for footprint: kubernetes.NewForConfig links the typed clients
// of every API group into the binary, and each page of code the process
// touches counts in its resident set. Building only the two groups' clients
// keeps that code out.
type nodeClientset struct {
	core         corev1.CoreV1Interface
	coordination coordinationv1.CoordinationV1Interface
	dialer       *connrotation.Dialer
}

var _ heartbeat.Client = (*nodeClientset)(nil)

func (c *nodeClientset) CoreV1() corev1.CoreV1Interface { return c.core }

func (c *nodeClientset) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return c.coordination
}

// closeConnections closes every connection the clientset opened, idle or
// not, so that the next request dials again: the heartbeat's
// OnRepeatedFailure, as kubelet closes its connections after repeated
// heartbeat failures (a dead TCP connection, say after a load balancer
// dropped it, would otherwise be reused until HTTP/2's health check gives
// up on it).
func (c *nodeClientset) closeConnections() { c.dialer.CloseAll() }

// newNodeClientset builds the two groups' clients on one HTTP client, so
// they share connections, dialled through a dialer that tracks them.
func newNodeClientset(cfg *rest.Config) (*nodeClientset, error) {
	cfg = rest.CopyConfig(cfg)
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg.Dial = dialer.DialContext
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	core, err := corev1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	coord, err := coordinationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return &nodeClientset{core: core, coordination: coord, dialer: dialer}, nil
}
