package cri

import (
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

// observeStatus records the runtime status call of a relist.
func (c *Syncer) observeStatus(st *runtimeapi.StatusResponse, err error) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.status.err, c.status.at = err, now
		return
	}
	c.status = observedStatus{status: st, at: now}
}

// statusDue reports whether the runtime's status is to be asked now: not
// yet asked, the last ask failed, the last answer said the runtime or its
// network is not ready, or StatusPeriod has passed since it.
func (c *Syncer) statusDue() bool {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	if s.status == nil || s.err != nil || !c.netReady || now.Before(s.at) || !now.Before(s.at.Add(c.statusPeriod)) {
		return true
	}
	for _, cond := range s.status.GetStatus().GetConditions() {
		if cond.Type == runtimeapi.RuntimeReady {
			return !cond.Status
		}
	}
	return true
}

// observeNetReady records the NetworkReady condition of a status answer.
func (c *Syncer) observeNetReady(st *runtimeapi.StatusResponse) {
	ready := false
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.Type == runtimeapi.NetworkReady {
			ready = cond.Status
		}
	}
	c.mu.Lock()
	c.netReady = ready
	c.mu.Unlock()
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
