package heartbeat_test

import (
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
)

// client-go's typed node client is a heartbeat.NodeClient with no adapter,
// and a heartbeat.NodeClient is a lease.NodeClient.
var (
	_ heartbeat.NodeClient = (typedcorev1.NodeInterface)(nil)
	_ lease.NodeClient     = (heartbeat.NodeClient)(nil)
)
