package optcheck

import (
	"cmp"
	"fmt"
)

// Min returns an error when v is below lo, for an option that has no upper
// bound: "<what> <v> must be at least <lo>", AtLeast's wording for what
// AtLeast cannot name (a field of another options struct).
func Min[T cmp.Ordered](what string, v, lo T) error {
	if v < lo {
		return fmt.Errorf("%s %v must be at least %v", what, v, lo)
	}
	return nil
}

// Max returns an error when v is above hi, for an option that has no lower
// bound: "<what> <v> must be at most <hi>".
func Max[T cmp.Ordered](what string, v, hi T) error {
	if v > hi {
		return fmt.Errorf("%s %v must be at most %v", what, v, hi)
	}
	return nil
}
