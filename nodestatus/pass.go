package nodestatus

import (
	"context"
	"sync"
)

// One run of a Setters list is a pass. Setters that need the same expensive
// answer (the host's facts, the runtime's status) ask for it through once, so
// that a pass asks the host and the runtime at most once each, while a setter
// run on its own, outside a Setters list, always asks afresh. Nothing is kept
// from one pass to the next, so a pass never sees a stale answer.

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

// withPass returns ctx carrying a fresh pass memo, or ctx itself when it
// already carries one (a Setters list inside another).
func withPass(ctx context.Context) context.Context {
	if _, ok := ctx.Value(passKey{}).(*passMemo); ok {
		return ctx
	}
	m := &passMemo{Context: ctx}
	m.entries = m.buf[:0]
	return m
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
