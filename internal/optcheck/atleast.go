package optcheck

import "fmt"

// AtLeast returns the error of an option below its lower bound:
//
//	<pkg>: Options.<field> <v> must be at least <lo>
//
// The caller compares: AtLeast only words the error, so v and lo may be of
// any type that prints (an int, a duration, a quantity's string).
func AtLeast(pkg, field string, v, lo any) error {
	return fmt.Errorf("%s: Options.%s %v must be at least %v", pkg, field, v, lo)
}
