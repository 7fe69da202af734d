package cri

import (
	"context"
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// observedStatus is the runtime's status as the last relist saw it.
type observedStatus struct {
	status *runtimeapi.StatusResponse
	at     time.Time
	err    error
}

// refreshStatus asks the runtime's status when that is due and records
// the answer (and its NetworkReady) or the failure, which it returns. It
// is due when not yet asked, after a failed ask, while the last answer
// said the runtime or its network is not ready, and StatusPeriod after
// the last answer.
func (c *Syncer) refreshStatus(ctx context.Context) error {
	c.mu.Lock()
	s, now := c.status, c.clock.Now()
	due := s.status == nil || s.err != nil || !c.netReady || !conditionTrue(s.status, runtimeapi.RuntimeReady) ||
		now.Before(s.at) || !now.Before(s.at.Add(c.statusPeriod))
	c.mu.Unlock()
	if !due {
		return nil
	}
	st, err := c.rt.Status(ctx, false)
	now = c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.status.err, c.status.at = err, now
		return err
	}
	c.status = observedStatus{status: st, at: now}
	c.netReady = conditionTrue(st, runtimeapi.NetworkReady)
	return nil
}

// conditionTrue reports whether a status answer has the condition typ and
// it holds.
func conditionTrue(st *runtimeapi.StatusResponse, typ string) bool {
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return false
}

// LatestRuntimeStatus returns the runtime's status as the last relist
// observed it and when, or the error of that relist's status call; a
// nodestatus.RuntimeStatusSource, so that the node's Ready condition
// follows what the pod half sees without a second poll of the runtime. It
// never waits on the runtime.
func (c *Syncer) LatestRuntimeStatus() (*runtimeapi.StatusResponse, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.err != nil {
		return nil, c.status.at, c.status.err
	}
	if c.status.status == nil {
		return nil, time.Time{}, errNotRelisted
	}
	return c.status.status, c.status.at, nil
}

var errNotRelisted = errors.New("podsync: the runtime has not been relisted yet")
