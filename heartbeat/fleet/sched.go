package fleet

import "math/bits"

// kind is one of a node's loops.
type kind uint8

const (
	kindLease  kind = 0
	kindStatus kind = 1
	kindPods   kind = 2
	nKinds          = 3
)

func (k kind) String() string {
	switch k {
	case kindLease:
		return "lease"
	case kindStatus:
		return "status"
	}
	return "pods"
}

// task is one scheduled step of one node.
type task struct {
	due  int64 // unix nanoseconds on the fleet's clock
	node int32
	kind kind
}

// taskKey names one scheduled step in the fleet's timer heap.
type taskKey struct {
	node int32
	kind kind
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
