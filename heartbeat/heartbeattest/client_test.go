package heartbeattest_test

import (
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/heartbeattest"
	"github.com/nodekit/nodekit/lease"
)

var (
	_ heartbeattest.Reactor = (*fake.Clientset)(nil)
	_ lease.LeaseClient     = (*heartbeattest.TrackerLeaseClient)(nil)
	_ fleet.LeaseClient     = (*heartbeattest.TrackerLeaseClient)(nil)
)
