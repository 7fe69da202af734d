package podsync

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// What the engine's tests in package podsync_test (which run it on
// podsync/cri's syncer, a package podsync's own tests cannot import) read of
// its insides.

// EvState is where the engine's event stream is.
type EvState = evState

const (
	EvNone     = evNone
	EvWatching = evWatching
	EvDown     = evDown
)

// EventState is the engine's event state.
func EventState(e *Engine) (state EvState, got, evented bool, nextRelist, retryAt time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ev, e.evGot, e.evented, e.nextRelist, e.evRetryAt
}

// NextObservation is when the engine next relists or (while evented) checks
// health, and whether a relist is asked for at once.
func NextObservation(e *Engine) (next time.Time, relistNow bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	next = e.nextRelist
	if e.evented && e.nextCheck.Before(next) {
		next = e.nextCheck
	}
	return next, e.relistNow
}

// EvDownLogged reports whether the engine has logged that events are off.
func EvDownLogged(e *Engine) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.evDownLogged
}

// Relist runs one relist of the engine.
func Relist(ctx context.Context, e *Engine) error { return e.relist(ctx) }

// SyncQueued reports whether the pod's sync waits for a slot.
func SyncQueued(e *Engine, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.workers[uid]
	return w.busy && !w.running
}

// RunningPods, RunningContainers and Preemptions are the engine's metrics
// of those names.
func RunningPods(e *Engine) prometheus.Gauge           { return e.metrics.runningPods }
func RunningContainers(e *Engine) *prometheus.GaugeVec { return e.metrics.runningContainers }
func Preemptions(e *Engine) *prometheus.CounterVec     { return e.metrics.preemptions }
