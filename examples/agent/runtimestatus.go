package main

import (
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/cri"
)

// runtimeStatus is the node's view of the runtime's status
// (nodestatus.RuntimeStatusSource): what the pod half's last relist
// observed, so that the Ready condition needs no poll of its own. Until the
// pod half runs, it says why: the runtime is not connected yet.
type runtimeStatus struct {
	conn *runtimeConn
	cri  atomic.Pointer[cri.Syncer]
}

var _ nodestatus.RuntimeStatusSource = (*runtimeStatus)(nil)

func (r *runtimeStatus) LatestRuntimeStatus() (*runtimeapi.StatusResponse, time.Time, error) {
	if c := r.cri.Load(); c != nil {
		return c.LatestRuntimeStatus()
	}
	r.conn.mu.Lock()
	err := r.conn.err
	r.conn.mu.Unlock()
	return nil, time.Time{}, err
}
