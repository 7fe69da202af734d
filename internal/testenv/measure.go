package testenv

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The measuring tests (hack/measure-*.sh, hack/bench-vs-kubelet.sh) read a
// process's figures from /proc and summarise latencies with the helpers
// below.

// ProcStatus returns the fields of /proc/<pid>/status by name, values with
// their runs of blanks folded ("VmRSS" -> "31404 kB").
func ProcStatus(pid int) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out, nil
}

// ProcRSS returns VmRSS of pid in bytes.
func ProcRSS(pid int) (int64, error) { return ProcStatusBytes(pid, "VmRSS") }

// ProcHWM returns VmHWM of pid in bytes: the peak of its resident set since
// it started.
func ProcHWM(pid int) (int64, error) { return ProcStatusBytes(pid, "VmHWM") }

// ProcStatusBytes returns a field of /proc/<pid>/status given in kB (VmRSS,
// VmHWM, RssAnon ...) in bytes.
func ProcStatusBytes(pid int, field string) (int64, error) {
	st, err := ProcStatus(pid)
	if err != nil {
		return 0, err
	}
	v, unit, _ := strings.Cut(st[field], " ")
	kb, err := strconv.ParseInt(v, 10, 64)
	if err != nil || unit != "kB" {
		return 0, fmt.Errorf("%s of %d: %q", field, pid, st[field])
	}
	return kb << 10, nil
}

// ProcCPUTicks returns utime+stime of pid (the process itself, not its
// children), in clock ticks of 1/100 s (Linux's USER_HZ).
func ProcCPUTicks(pid int) (int64, error) { return procStatTicks(pid, 2) }

// ProcCPUTicksWithChildren is ProcCPUTicks plus cutime+cstime: the CPU of
// pid's children that it has waited for.
func ProcCPUTicksWithChildren(pid int) (int64, error) { return procStatTicks(pid, 4) }

// procStatTicks sums n fields of /proc/<pid>/stat from utime (field 14).
func procStatTicks(pid, n int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces), from field 3.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 11+n {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	var ticks int64
	for _, v := range f[11 : 11+n] {
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
		}
		ticks += t
	}
	return ticks, nil
}

// TicksPerSecond is the unit of ProcCPUTicks and ProcCPUTicksWithChildren.
const TicksPerSecond = 100

// LoadAvg returns the 1, 5 and 15 minute load averages as /proc/loadavg
// writes them ("0.12 0.30 0.25"), or the error's text.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return string(b)
	}
	return strings.Join(f[:3], " ")
}

// Percentile returns the p-th (0 < p <= 1) nearest-rank percentile of d,
// or 0 when d is empty. d is not modified.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(min(i, len(s)-1), 0)]
}

// EnvDuration returns the duration in the environment variable key, or def
// when it is unset or empty.
func EnvDuration(key string, def time.Duration) (time.Duration, error) {
	s := os.Getenv(key)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return d, nil
}

// EnvInt returns the positive integer in the environment variable key, or
// def when it is unset or empty.
func EnvInt(key string, def int) (int, error) {
	s := os.Getenv(key)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", key, s)
	}
	return n, nil
}
