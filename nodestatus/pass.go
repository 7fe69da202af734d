package nodestatus

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// One run of a Setters list is a pass. Setters that need the same expensive
// answer (the host's facts, the runtime's status) ask for it through once, so
// that a pass asks the host and the runtime at most once each, while a setter
// run on its own, outside a Setters list, always asks afresh. Nothing is kept
// from one pass to the next, so a pass never sees a stale answer. A pass also
// has one time, which every setter in it reads with Now.

type passKey struct{}

type passEntry struct {
	key any
	val any
	err error
}

// passMemo is the context of one pass: its parent plus the answers asked
// so far (one allocation per pass).
type passMemo struct {
	context.Context
	now     time.Time
	mu      sync.Mutex
	entries []passEntry
	buf     [4]passEntry
}

func (m *passMemo) Value(key any) any {
	if key == (passKey{}) {
		return m
	}
	return m.Context.Value(key)
}

// inPass reports whether ctx belongs to a pass.
func inPass(ctx context.Context) bool {
	_, ok := ctx.Value(passKey{}).(*passMemo)
	return ok
}

// newPass returns ctx carrying a fresh pass memo whose time is now.
func newPass(ctx context.Context, now time.Time) context.Context {
	m := &passMemo{Context: ctx, now: now}
	m.entries = m.buf[:0]
	return m
}

// Now returns the time of the status pass that ctx belongs to: the time
// Setters.Run was given, or the time Setters.SetStatus read from its clock
// when the pass began. Every setter of a pass sees the same time, and under
// a fake clock a fake time, so a custom setter stamps its conditions with
// it (SetCondition(node, c, nodestatus.Now(ctx))). Outside a pass (a setter
// called on its own) it is the real clock's time.
func Now(ctx context.Context) metav1.Time {
	return metav1.NewTime(passNow(ctx, clock.RealClock{}))
}

// passNow is the pass's time, or clk's now outside a pass.
func passNow(ctx context.Context, clk clock.PassiveClock) time.Time {
	if m, ok := ctx.Value(passKey{}).(*passMemo); ok {
		return m.now
	}
	return clk.Now()
}

// once returns fetch's answer for key, calling fetch at most once per pass.
func once[T any](ctx context.Context, key any, fetch func(context.Context) (T, error)) (T, error) {
	m, ok := ctx.Value(passKey{}).(*passMemo)
	if !ok {
		return fetch(ctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.key == key {
			v, _ := e.val.(T)
			return v, e.err
		}
	}
	v, err := fetch(ctx)
	m.entries = append(m.entries, passEntry{key: key, val: v, err: err})
	return v, err
}
