package lease_test

import (
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodekit/nodekit/lease"
)

// client-go's typed clients are the package's clients, with no adapter; the
// package itself does not import them, so a binary that uses lease does not
// link client-go's scheme of every API group.
var (
	_ lease.LeaseClient = (typedcoordinationv1.LeaseInterface)(nil)
	_ lease.NodeClient  = (typedcorev1.NodeInterface)(nil)
)
