// Package backoff is nodekit's one exponential back-off: a single Backoff for
// a loop that retries one thing (registration, lease renewal, a runtime
// connection) and a Map of them keyed by what failed (crash-looping
// containers, image pulls). Both double from Initial up to Max. They hold no
// clock of their own; Map takes the time of each event from its caller, so a
// fake clock drives it.
package backoff

import (
	"time"

	"github.com/nodekit/nodekit/internal/optcheck"
)

// Backoff is the wait before the next retry of one thing. The zero value is
// unusable: set Initial and Max (or use New).
type Backoff struct {
	// Initial is the first wait after a failure.
	Initial time.Duration
	// Max caps the wait; each further failure doubles it up to Max.
	Max time.Duration

	cur time.Duration
}

// New returns a Backoff from initial doubling to max, or an error naming
// what (for example "lease: Options.EnsureBackoff") is out of bounds: initial
// must be at least floor and at most max.
func New(what string, initial, max, floor time.Duration) (Backoff, error) {
	if err := optcheck.Range(what, initial, floor, max); err != nil {
		return Backoff{}, err
	}
	return Backoff{Initial: initial, Max: max}, nil
}

// Next records a failure and returns how long to wait before retrying:
// Initial after the first failure, then twice the previous wait, at most Max.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Initial
	} else {
		b.cur = min(2*b.cur, b.Max)
	}
	return b.cur
}

// Current is the wait Next last returned, 0 after Reset.
func (b *Backoff) Current() time.Duration { return b.cur }

// Reset records a success: the next failure waits Initial again.
func (b *Backoff) Reset() { b.cur = 0 }

// Map keeps one back-off per key, as the kubelet does for crash-looping
// containers and failed image pulls: the wait doubles from Initial to Max
// with each failure of the same key, and a key whose last failure is older
// than ResetAfter starts again from Initial. Not safe for concurrent use.
type Map[K comparable] struct {
	// Initial, Max: as in Backoff.
	Initial, Max time.Duration
	// ResetAfter forgets a key whose last failure is at least this old
	// (kubelet: 2×Max, 10 minutes for containers). 0 means 2×Max.
	ResetAfter time.Duration

	entries map[K]entry
}

type entry struct {
	wait time.Duration
	last time.Time // when the failure that set wait happened
}

func (m *Map[K]) resetAfter() time.Duration {
	if m.ResetAfter > 0 {
		return m.ResetAfter
	}
	return 2 * m.Max
}

// Next records a failure of key at now and returns the wait that follows it.
func (m *Map[K]) Next(key K, now time.Time) time.Duration {
	if m.entries == nil {
		m.entries = make(map[K]entry)
	}
	e, ok := m.entries[key]
	if !ok || now.Sub(e.last) >= m.resetAfter() {
		e.wait = m.Initial
	} else {
		e.wait = min(2*e.wait, m.Max)
	}
	e.last = now
	m.entries[key] = e
	return e.wait
}

// Until returns when key's back-off ends, and false if key is not backing
// off at now (never failed, forgotten, or its wait has passed).
func (m *Map[K]) Until(key K, now time.Time) (time.Time, bool) {
	e, ok := m.entries[key]
	if !ok || now.Sub(e.last) >= m.resetAfter() {
		return time.Time{}, false
	}
	end := e.last.Add(e.wait)
	if !now.Before(end) {
		return end, false
	}
	return end, true
}

// Wait is the wait key's last failure set, 0 if none is remembered at now.
func (m *Map[K]) Wait(key K, now time.Time) time.Duration {
	e, ok := m.entries[key]
	if !ok || now.Sub(e.last) >= m.resetAfter() {
		return 0
	}
	return e.wait
}

// Forget drops key (its thing succeeded for good or went away).
func (m *Map[K]) Forget(key K) { delete(m.entries, key) }

// GC drops every key whose last failure is older than ResetAfter at now, so
// the map stays as small as the set of things failing recently.
func (m *Map[K]) GC(now time.Time) {
	for k, e := range m.entries {
		if now.Sub(e.last) >= m.resetAfter() {
			delete(m.entries, k)
		}
	}
}

// Len is the number of keys remembered.
func (m *Map[K]) Len() int { return len(m.entries) }
