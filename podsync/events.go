package podsync

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
)

// DefaultEventedRelistPeriod is Options.EventedRelistPeriod's default, the
// kubelet's relist period while its evented PLEG receives the runtime's
// container events.
const DefaultEventedRelistPeriod = 300 * time.Second

// The back-off between attempts to (re)open an event stream that failed:
// 1s doubling to 1m, started afresh after a stream that lasted 1m.
const (
	eventRetryInitial = time.Second
	eventRetryMax     = time.Minute
)

// PodEvent says that something of a pod changed in the backend: a
// container or sandbox was created, started, stopped or deleted.
type PodEvent struct {
	// UID is the pod's, "" when the event does not say.
	UID types.UID
	// SandboxID and ContainerID name what changed, when the backend says;
	// the engine finds the pod by them (in its last observation) when UID is
	// "". For a sandbox's own event ContainerID is the sandbox's ID, as in CRI.
	SandboxID, ContainerID string
}

// EventWatcher is implemented by a Relister whose backend can stream pod
// events. Engine.Run watches them: an event relists the one pod at once
// (the whole backend when the Relister is not a PodRelister), and while the
// stream is up the full relist slows to Options.EventedRelistPeriod.
type EventWatcher interface {
	// WatchEvents calls fn for each event, on the caller's goroutine, until
	// ctx ends (it returns ctx's error) or the stream fails or ends. An
	// error matching ErrNoEvents says the backend has no events at all.
	WatchEvents(ctx context.Context, fn func(PodEvent)) error
}

// HealthChecker is implemented by a Relister that can check its backend
// more cheaply than by a relist. While events stand in for relists, the
// engine calls CheckHealth every RelistPeriod; an error makes it relist
// at once (and a failed relist pauses syncs).
type HealthChecker interface {
	CheckHealth(ctx context.Context) error
}

// ErrNoEvents matches WatchEvents' error when the backend has no event
// stream (a CRI runtime that answers GetContainerEvents with
// Unimplemented, as containerd 1.6 does).
var ErrNoEvents = errors.New("podsync: the backend has no pod events")

// evState is where the engine's event stream is.
type evState int

const (
	evNone     evState = iota // no EventWatcher, or no events: relist only
	evWatching                // a WatchEvents call is open
	evDown                    // between a failed stream and the next attempt
)

// watchEvents keeps a stream of the Relister's events open until ctx ends,
// retrying a failed one with back-off; it returns for good when the backend
// has no events.
func (e *Engine) watchEvents(ctx context.Context, w EventWatcher) {
	logger := klog.FromContext(ctx)
	bo := backoff.Backoff{Initial: eventRetryInitial, Max: eventRetryMax}
	for {
		start := e.o.Clock.Now()
		e.mu.Lock()
		e.ev, e.evSince, e.evGot = evWatching, start, false
		e.mu.Unlock()
		err := w.WatchEvents(ctx, e.handleEvent)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the event stream ended")
		}
		none := errors.Is(err, ErrNoEvents)
		if e.o.Clock.Since(start) >= eventRetryMax {
			bo.Reset()
		}
		wait := bo.Next()
		e.mu.Lock()
		wasEvented, logged := e.evented, e.evDownLogged
		e.evented, e.evDownLogged = false, true
		if wasEvented {
			// Events may have been missed since the stream broke, and the
			// last relist is up to EventedRelistPeriod old.
			e.relistNow = true
		}
		var t clock.Timer
		if none {
			e.ev = evNone
		} else {
			e.ev = evDown
			// Armed under the lock, so that a test that sees evDown can step
			// the clock past it.
			t = e.o.Clock.NewTimer(wait)
			e.evRetryAt = e.o.Clock.Now().Add(wait)
		}
		e.mu.Unlock()
		e.poke()
		switch {
		case none:
			logger.Info("The container runtime has no container events; relisting", "period", e.o.RelistPeriod, "err", err)
			return
		case !logged:
			logger.Info("Container events stream failed; relisting until it is back", "period", e.o.RelistPeriod, "retryIn", wait, "err", err)
		default:
			logger.V(4).Info("Container events stream failed again", "retryIn", wait, "err", err)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// handleEvent marks the event's pod for a relist and wakes Run.
func (e *Engine) handleEvent(ev PodEvent) {
	e.mu.Lock()
	e.evGot = true
	uid := ev.UID
	if uid == "" {
		uid = e.podOfLocked(ev.SandboxID, ev.ContainerID)
	}
	if uid != "" {
		if e.evPods == nil {
			e.evPods = map[types.UID]struct{}{}
		}
		e.evPods[uid] = struct{}{}
	}
	e.mu.Unlock()
	if uid != "" {
		e.poke()
	}
}

// podOfLocked finds the pod that a sandbox or container ID belongs to in
// the last observation, or "".
func (e *Engine) podOfLocked(sandboxID, containerID string) types.UID {
	for uid, st := range e.cache {
		for _, s := range st.Sandboxes {
			if s.ID == sandboxID && sandboxID != "" || s.ID == containerID && containerID != "" {
				return uid
			}
		}
		for _, c := range st.Containers {
			if c.ID == containerID && containerID != "" {
				return uid
			}
		}
	}
	return ""
}

// eventedLocked reports whether the relist may slow down: a stream is open
// and has delivered an event or stayed open for a relist period.
func (e *Engine) eventedLocked(now time.Time) bool {
	return e.ev == evWatching && (e.evGot || now.Sub(e.evSince) >= e.o.RelistPeriod)
}

// relistPods observes the pods events named, one at a time, and publishes
// the new status of those that changed, as a relist does. An error leaves
// the rest to a full relist at once.
func (e *Engine) relistPods(ctx context.Context, pr PodRelister, uids []types.UID) {
	for _, uid := range uids {
		e.mu.Lock()
		seen := e.changes
		e.mu.Unlock()
		st, err := pr.RelistPod(ctx, uid)
		if err != nil {
			e.mu.Lock()
			e.relistNow = true
			e.mu.Unlock()
			return
		}
		e.mu.Lock()
		if w := e.workers[uid]; w != nil {
			w.observed(seen)
		}
		w := e.observePodLocked(uid, st, e.o.Clock.Now())
		e.mu.Unlock()
		if w != nil {
			e.publishBetweenSyncs(w)
		}
	}
}

// observePodLocked takes one pod's new observation into the cache: a
// change wakes its worker (and returns it when its status is to be
// published now, wakeLocked), and an unknown pod's state may make an
// orphan.
func (e *Engine) observePodLocked(uid types.UID, st *PodState, now time.Time) *worker {
	if stateEqual(e.cache[uid], st) {
		return nil
	}
	if st == nil {
		delete(e.cache, uid)
	} else {
		e.cache[uid] = st
	}
	w := e.wakeLocked(uid, now)
	if _, ok := e.workers[uid]; !ok && st != nil && e.sourcesReadyLocked() {
		e.orphanLocked(uid, st, now)
	}
	e.updateGauges(e.cache)
	return w
}

// check asks the backend's health between relists; a failure, or sources
// ready since the last relist, relists at once.
func (e *Engine) check(ctx context.Context) {
	var err error
	if hc, ok := e.o.Relister.(HealthChecker); ok {
		err = hc.CheckHealth(ctx)
	}
	e.mu.Lock()
	e.nextCheck = e.o.Clock.Now().Add(e.o.RelistPeriod)
	// A failure relists at once; so do sources that became ready since
	// the last relist, which finds the orphans (the events name only the
	// pods that change, and the next full relist may be minutes away).
	if err != nil || !e.orphansSought && e.sourcesReadyLocked() {
		e.relistNow = true
	}
	e.mu.Unlock()
}
