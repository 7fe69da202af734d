package randutil

import "testing"

func TestOr(t *testing.T) {
	if got := Or(func() float64 { return 0.25 })(); got != 0.25 {
		t.Errorf("Or(r)() = %v, want r's 0.25", got)
	}
	for range 100 {
		if v := Or(nil)(); v < 0 || v >= 1 {
			t.Fatalf("Or(nil)() = %v, want in [0, 1)", v)
		}
	}
}
