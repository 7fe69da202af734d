package heartbeattest

import "math/bits"

// kind is one of a node's two loops.
type kind uint8

const (
	kindLease  kind = 0
	kindStatus kind = 1
	nKinds          = 2
)

func (k kind) String() string {
	if k == kindLease {
		return "lease"
	}
	return "status"
}

// task is one scheduled step of one node.
type task struct {
	due  int64 // unix nanoseconds on the fleet's clock
	node int32
	kind kind
}

// taskHeap is a min-heap on due (then node, then kind, so that the order of
// a batch is the same in every run). Each node records where its tasks sit,
// so that a task can be moved earlier (Fix) or removed.
type taskHeap struct {
	items []task
	nodes []Node // the fleet's nodes, for the index bookkeeping
}

func (h *taskHeap) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	if a.due != b.due {
		return a.due < b.due
	}
	if a.node != b.node {
		return a.node < b.node
	}
	return a.kind < b.kind
}

func (h *taskHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.nodes[h.items[i].node].hidx[h.items[i].kind] = int32(i)
	h.nodes[h.items[j].node].hidx[h.items[j].kind] = int32(j)
}

func (h *taskHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *taskHeap) down(i int) bool {
	i0, n := i, len(h.items)
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

func (h *taskHeap) push(t task) {
	h.items = append(h.items, t)
	i := len(h.items) - 1
	h.nodes[t.node].hidx[t.kind] = int32(i)
	h.up(i)
}

func (h *taskHeap) pop() task {
	n := len(h.items) - 1
	h.swap(0, n)
	t := h.items[n]
	h.items = h.items[:n]
	if n > 0 {
		h.down(0)
	}
	h.nodes[t.node].hidx[t.kind] = -1
	return t
}

// fix moves the task at i to its place after its due time changed.
func (h *taskHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// remove takes the task at i out of the heap.
func (h *taskHeap) remove(i int) task {
	n := len(h.items) - 1
	if n != i {
		h.swap(i, n)
	}
	t := h.items[n]
	h.items = h.items[:n]
	if n != i {
		h.fix(i)
	}
	h.nodes[t.node].hidx[t.kind] = -1
	return t
}

// phase spreads node i's slot evenly over a period of length period (in
// nanoseconds) for any number of nodes: the fractional parts of i times the
// golden ratio are as evenly spread as a sequence can be.
func phase(i int, salt uint64, period int64) int64 {
	frac := (uint64(i)+1)*0x9E3779B97F4A7C15 + salt
	hi, _ := bits.Mul64(frac, uint64(period))
	return int64(hi)
}

// slot is node i's phase in a period, rounded up to a multiple of gran (at
// most the period) when gran is shorter than the period, so that the steps
// of nodes whose slots share a tick run as one batch. Like the phase, it is
// in (0, period]: the first slot comes after the start, within one period.
func slot(i int, salt uint64, period, gran int64) int64 {
	ph := phase(i, salt, period)
	if gran > 0 && gran < period {
		ph = min((ph+gran-1)/gran*gran, period)
	}
	return ph
}

// nextSlot returns the first time after t on the grid epoch+ph+k*period.
func nextSlot(t, epoch, ph, period int64) int64 {
	base := epoch + ph
	if t < base {
		return base
	}
	k := (t-base)/period + 1
	return base + k*period
}
