// Package pressure holds what nodestatus's pressure setters and
// podsync/eviction's manager share: the one table of eviction signals
// (name, pressure condition, resource, what it is observed on), kubelet's
// wording of the pressure conditions, kubelet's default hard eviction
// thresholds, the one parser of a threshold's value, and the pressure
// transition rule.
package pressure

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultTransitionPeriod is kubelet's evictionPressureTransitionPeriod.
const DefaultTransitionPeriod = 5 * time.Minute

// DefaultEvictionHard returns kubelet's hard eviction thresholds on Linux.
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		MemoryAvailable:   "100Mi",
		NodeFsAvailable:   "10%",
		NodeFsInodesFree:  "5%",
		ImageFsAvailable:  "15%",
		ImageFsInodesFree: "5%",
	}
}

// ErrIgnored is returned by ParseThreshold for "0%" and "100%", which
// kubelet ignores.
var ErrIgnored = errors.New("threshold ignored")

// ParseThreshold parses a threshold's value as kubelet does: a quantity
// greater than zero, or a percentage of capacity within (0%, 100%], returned
// as written (10 for "10%"), parsed at float32 precision as kubelet parses
// it. "0%" and "100%" give ErrIgnored. Errors other than ErrIgnored name the
// value, not the setting: callers prefix them with it.
func ParseThreshold(v string) (q *resource.Quantity, percent float64, err error) {
	v = strings.TrimSpace(v)
	if p, ok := strings.CutSuffix(v, "%"); ok {
		if v == "0%" || v == "100%" {
			return nil, 0, ErrIgnored
		}
		f, err := strconv.ParseFloat(p, 32)
		if err != nil {
			return nil, 0, fmt.Errorf("%q is not a percentage", v)
		}
		pct := float32(f) / 100
		if pct <= 0 {
			return nil, 0, fmt.Errorf("percentage threshold must be positive: %s", v)
		}
		if pct > 1 {
			return nil, 0, fmt.Errorf("percentage threshold must be <= 100%%: %s", v)
		}
		return nil, f, nil
	}
	parsed, err := resource.ParseQuantity(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%q is not a quantity or percentage", v)
	}
	if parsed.Sign() <= 0 {
		return nil, 0, fmt.Errorf("threshold must be positive: %s", v)
	}
	return &parsed, 0, nil
}

// Under reports whether a pressure condition is True at now: pressure was
// last observed at lastObserved (zero: never) less than period ago.
func Under(lastObserved, now time.Time, period time.Duration) bool {
	return !lastObserved.IsZero() && now.Sub(lastObserved) < period
}
