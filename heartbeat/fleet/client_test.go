package fleet_test

import (
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodekit/nodekit/heartbeat/fleet"
)

// client-go's typed clients are the fleet's clients, with no adapter.
var (
	_ fleet.NodeClient  = (typedcorev1.NodeInterface)(nil)
	_ fleet.LeaseClient = (typedcoordinationv1.LeaseInterface)(nil)
	_ fleet.LeaseClient = (*fleet.LeanLeaseClient)(nil)
)
