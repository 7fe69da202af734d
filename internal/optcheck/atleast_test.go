package optcheck

import (
	"testing"
	"time"
)

func TestAtLeast(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{AtLeast("eviction", "MaxPodGracePeriod", int64(-1), 0), "eviction: Options.MaxPodGracePeriod -1 must be at least 0"},
		{AtLeast("x", "Period", -time.Second, time.Duration(0)), "x: Options.Period -1s must be at least 0s"},
		{AtLeast("nodestatus", "SystemReserved[cpu]", "-1", 0), "nodestatus: Options.SystemReserved[cpu] -1 must be at least 0"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("got %v, want %q", tc.err, tc.want)
		}
	}
}
