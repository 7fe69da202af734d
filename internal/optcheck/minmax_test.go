package optcheck

import (
	"testing"
	"time"
)

func TestMinMax(t *testing.T) {
	if err := Min("eviction: ImageGCOptions.MinAge", -time.Second, 0); err == nil ||
		err.Error() != "eviction: ImageGCOptions.MinAge -1s must be at least 0s" {
		t.Errorf("Min: %v", err)
	}
	if err := Min("AuthOptions.CacheSize", 1, 1); err != nil {
		t.Errorf("Min's bound is inclusive: %v", err)
	}
	if err := Max("AuthOptions.ReviewRetries", 11, 10); err == nil ||
		err.Error() != "AuthOptions.ReviewRetries 11 must be at most 10" {
		t.Errorf("Max: %v", err)
	}
	if err := Max("AuthOptions.ReviewRetries", 10, 10); err != nil {
		t.Errorf("Max's bound is inclusive: %v", err)
	}
	if got, want := Min("x: Options.N", -1, 0).Error(), AtLeast("x", "N", -1, 0).Error(); got != want {
		t.Errorf("Min says %q, AtLeast %q", got, want)
	}
}
