package main

import (
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	kubeclient "github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/podsync/volume"
)

// nodeClient serves only the resources a node agent uses: Nodes, Pods,
// Events, Secrets, ConfigMaps, Services and ServiceAccount tokens of
// core/v1, Leases of coordination.k8s.io/v1, and the TokenReviews and
// SubjectAccessReviews of the node API, each client being the client a
// nodekit package declares.
//
// It exists for footprint: client-go's clientset registers every API group
// in its scheme at start-up and links the typed clients and apply
// configurations of every group, and each page of that the process touches
// counts in its resident set. kubeclient's scheme holds the four groups it
// needs.
type nodeClient struct {
	*kubeclient.Client
	dialer *connrotation.Dialer
}

// closeConnections closes every connection the client opened, idle or
// not, so that the next request dials again: the heartbeat's
// OnRepeatedFailure, as kubelet closes its connections after repeated
// heartbeat failures (a dead TCP connection, say after a load balancer
// dropped it, would otherwise be reused until HTTP/2's health check gives
// up on it).
func (c *nodeClient) closeConnections() { c.dialer.CloseAll() }

// newNodeClient builds the client on one HTTP client, so that every
// resource shares its connections, dialled through a dialer that tracks
// them.
func newNodeClient(cfg *rest.Config) (*nodeClient, error) {
	cfg = rest.CopyConfig(cfg)
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg.Dial = dialer.DialContext
	c, err := kubeclient.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return &nodeClient{Client: c, dialer: dialer}, nil
}

// nodeLeases is the client of the node leases.
func (c *nodeClient) nodeLeases() *kubeclient.LeaseResource { return c.Leases(lease.DefaultNamespace) }

// mirrorPods is podsource.MirrorPodsOptions.Pods.
func (c *nodeClient) mirrorPods(ns string) podsource.MirrorPodClient { return c.Pods(ns) }

// statusPods is status.Options.Pods.
func (c *nodeClient) statusPods(ns string) status.PodClient { return c.Pods(ns) }

// volumeClients sets o's API clients.
func (c *nodeClient) volumeClients(o *volume.Options) {
	o.Secrets = func(ns string) volume.SecretClient { return c.Secrets(ns) }
	o.ConfigMaps = func(ns string) volume.ConfigMapClient { return c.ConfigMaps(ns) }
	o.Services = func(ns string) volume.ServiceClient { return c.Services(ns) }
	o.ServiceAccounts = func(ns string) volume.ServiceAccountClient { return c.ServiceAccounts(ns) }
}
