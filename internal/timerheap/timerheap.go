// Package timerheap is nodekit's one timer heap: a min-heap of keys ordered
// by when each is next due, for loops that run many small timers on one
// injected clock (probe workers, fleet nodes, pod workers) instead of a
// goroutine and a timer each. Keys due at the same instant come out in the
// order they were scheduled. Not safe for concurrent use.
package timerheap

import "time"

type item[K comparable] struct {
	key K
	due time.Time
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
	if i, ok := h.index[key]; ok {
		h.items[i].due, h.items[i].seq = due, h.seq
		if !h.down(i) {
			h.up(i)
		}
		return
	}
	h.items = append(h.items, item[K]{key: key, due: due, seq: h.seq})
	i := len(h.items) - 1
	h.index[key] = i
	h.up(i)
}

// Due returns when key is scheduled, and false if it is not.
func (h *Heap[K]) Due(key K) (time.Time, bool) {
	i, ok := h.index[key]
	if !ok {
		return time.Time{}, false
	}
	return h.items[i].due, true
}

// Remove unschedules key; it reports whether key was scheduled.
func (h *Heap[K]) Remove(key K) bool {
	i, ok := h.index[key]
	if !ok {
		return false
	}
	n := len(h.items) - 1
	if i != n {
		h.swap(i, n)
	}
	h.items = h.items[:n]
	delete(h.index, key)
	if i != n && !h.down(i) {
		h.up(i)
	}
	if n == 0 {
		h.items = h.items[:0:0] // let a heap that grew large shrink
	}
	return true
}

// Peek returns the earliest key and its due time, and false when empty.
func (h *Heap[K]) Peek() (K, time.Time, bool) {
	if len(h.items) == 0 {
		var zero K
		return zero, time.Time{}, false
	}
	return h.items[0].key, h.items[0].due, true
}

// PopDue removes and returns the earliest key if it is due at now (its due
// time is not after now).
func (h *Heap[K]) PopDue(now time.Time) (K, bool) {
	if len(h.items) == 0 || h.items[0].due.After(now) {
		var zero K
		return zero, false
	}
	k := h.items[0].key
	h.Remove(k)
	return k, true
}

func (h *Heap[K]) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.seq < b.seq
}

func (h *Heap[K]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].key] = i
	h.index[h.items[j].key] = j
}

func (h *Heap[K]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			return
		}
		h.swap(i, j)
		j = i
	}
}

func (h *Heap[K]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
