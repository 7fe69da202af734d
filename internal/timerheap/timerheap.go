// Package timerheap is nodekit's one timer heap: a min-heap of keys ordered
// by when each is next due, for loops that run many small timers on one
// injected clock (probe workers, fleet nodes, pod workers) instead of a
// goroutine and a timer each. Keys due at the same instant come out in the
// order they were scheduled. Not safe for concurrent use.
package timerheap

import "time"

type item[K comparable] struct {
	key K
	due int64 // unix nanoseconds: cheaper to compare than time.Time
	seq uint64
}

// Heap is a min-heap of keys by due time. The zero value is empty and ready.
type Heap[K comparable] struct {
	items []item[K]
	index map[K]int
	seq   uint64
}

// Len is the number of scheduled keys.
func (h *Heap[K]) Len() int { return len(h.items) }

// Set schedules key at due, moving it if it is scheduled already.
func (h *Heap[K]) Set(key K, due time.Time) {
	if h.index == nil {
		h.index = make(map[K]int)
	}
	h.seq++
	it := item[K]{key: key, due: due.UnixNano(), seq: h.seq}
	if i, ok := h.index[key]; ok {
		h.fix(i, it)
		return
	}
	h.items = append(h.items, it)
	h.up(len(h.items)-1, it)
}

// Due returns when key is scheduled, and false if it is not.
func (h *Heap[K]) Due(key K) (time.Time, bool) {
	i, ok := h.index[key]
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, h.items[i].due), true
}

// Remove unschedules key; it reports whether key was scheduled.
func (h *Heap[K]) Remove(key K) bool {
	i, ok := h.index[key]
	if !ok {
		return false
	}
	delete(h.index, key)
	n := len(h.items) - 1
	last := h.items[n]
	var zero item[K]
	h.items[n] = zero // drop the reference a key may hold
	h.items = h.items[:n]
	if i != n {
		h.fix(i, last)
	}
	return true
}

// Peek returns the earliest key and its due time, and false when empty.
func (h *Heap[K]) Peek() (K, time.Time, bool) {
	if len(h.items) == 0 {
		var zero K
		return zero, time.Time{}, false
	}
	return h.items[0].key, time.Unix(0, h.items[0].due), true
}

// PopDue removes and returns the earliest key if it is due at now (its due
// time is not after now).
func (h *Heap[K]) PopDue(now time.Time) (K, bool) {
	if len(h.items) == 0 || h.items[0].due > now.UnixNano() {
		var zero K
		return zero, false
	}
	k := h.items[0].key
	h.Remove(k)
	return k, true
}

func less[K comparable](a, b *item[K]) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

// fix places it at position i, moving it up or down to where it belongs.
func (h *Heap[K]) fix(i int, it item[K]) {
	if i > 0 && less(&it, &h.items[(i-1)/2]) {
		h.up(i, it)
		return
	}
	h.down(i, it)
}

// up moves the hole at j towards the root until it can hold it, then puts it
// there: one index write per level instead of a swap's two.
func (h *Heap[K]) up(j int, it item[K]) {
	for j > 0 {
		i := (j - 1) / 2
		if !less(&it, &h.items[i]) {
			break
		}
		h.items[j] = h.items[i]
		h.index[h.items[j].key] = j
		j = i
	}
	h.items[j] = it
	h.index[it.key] = j
}

// down moves the hole at i towards the leaves until it can hold it.
func (h *Heap[K]) down(i int, it item[K]) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && less(&h.items[r], &h.items[l]) {
			j = r
		}
		if !less(&h.items[j], &it) {
			break
		}
		h.items[i] = h.items[j]
		h.index[h.items[i].key] = i
		i = j
	}
	h.items[i] = it
	h.index[it.key] = i
}
