// Package memlimit reads the example programs' --memory-limit flag and
// sets the Go runtime's soft memory limit from it.
package memlimit

import (
	"fmt"
	"os"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Parse reads a flag value: a size such as 160Mi, or "0" or "" for none
// (0). A negative or malformed size is an error.
func Parse(s string) (int64, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("%q: want a size such as 160Mi, or 0 for none", s)
	}
	return q.Value(), nil
}

// Apply sets limit bytes as the runtime's soft memory limit
// (debug.SetMemoryLimit), unless limit is 0 or the environment sets
// GOMEMLIMIT, which wins. It reports whether it set the limit.
func Apply(limit int64) bool {
	if limit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	debug.SetMemoryLimit(limit)
	return true
}
