// Package optcheck words the errors of invalid options, the one way every
// package's New does:
//
//	<pkg>: Options.<Field> <value> must be in [<min>, <max>]
//	<pkg>: Options.<Field> <value> must be at least <min>
//	<pkg>: Options.<Field> <value> must be at most <max>
//	<pkg>: Options.<Field> is required
//
// what is "<pkg>: Options.<Field>" (or the name of another options struct,
// "nodeapi: AuthOptions.NodeName"). An option with one bound names it as a
// number ("at least 1", not "positive"; "at least 0", not "not
// negative"): the least value it takes once defaulted, so a zero that
// means the default does not count. AtLeast words it for a field of
// Options; Min and Max for any what.
package optcheck

import (
	"cmp"
	"errors"
	"fmt"
)

// Range returns an error when v is outside [lo, hi], for durations and
// integers alike.
func Range[T cmp.Ordered](what string, v, lo, hi T) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s %v must be in [%v, %v]", what, v, lo, hi)
	}
	return nil
}

// Required returns the error of a required option that is not set.
func Required(what string) error {
	return errors.New(what + " is required")
}
