//go:build linux

package nodestatus_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// reportCPU adds cpu-ns/op: the process's CPU time (user and system) per
// operation since start, which, unlike ns/op, does not grow when other
// processes compete for the CPUs.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
