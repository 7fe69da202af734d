package memlimit

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "160Mi": 160 << 20, "1G": 1e9} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1Mi", "lots", "1Zz"} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), in) {
			t.Errorf("Parse(%q): error %v, want one naming the value", in, err)
		}
	}
}

func TestApply(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	if Apply(0) || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Error("Apply(0) set a limit")
	}
	if !Apply(64<<20) || debug.SetMemoryLimit(-1) != 64<<20 {
		t.Error("Apply(64Mi) did not set the limit")
	}
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "1GiB")
	if Apply(64<<20) || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Error("Apply set a limit over GOMEMLIMIT")
	}
}
