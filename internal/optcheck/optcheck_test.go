package optcheck

import (
	"testing"
	"time"
)

func TestRange(t *testing.T) {
	if err := Range("lease: Options.RenewInterval", 10*time.Nanosecond, time.Second, 40*time.Second); err == nil ||
		err.Error() != "lease: Options.RenewInterval 10ns must be in [1s, 40s]" {
		t.Errorf("duration out of range: %v", err)
	}
	if err := Range("podsync: Options.MaxParallel", 0, 1, 10000); err == nil ||
		err.Error() != "podsync: Options.MaxParallel 0 must be in [1, 10000]" {
		t.Errorf("int out of range: %v", err)
	}
	if err := Range("x: Options.N", 1, 1, 1); err != nil {
		t.Errorf("bounds are inclusive: %v", err)
	}
	if err := Required("lease: Options.Leases"); err.Error() != "lease: Options.Leases is required" {
		t.Errorf("Required: %v", err)
	}
}
