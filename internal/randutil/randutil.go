// Package randutil fills in the default of every Options.Rand.
//
// Options.Rand has one type across nodekit: func() float64, returning a
// number in [0, 1), which a test fakes with a closure returning a constant.
// Its default is math/rand/v2's Float64, which is safe for concurrent use;
// a Rand that a user passes must be too.
package randutil

import "math/rand/v2"

// Or returns r, or math/rand/v2.Float64 when r is nil.
func Or(r func() float64) func() float64 {
	if r == nil {
		return rand.Float64
	}
	return r
}
