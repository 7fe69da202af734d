// Package testenv decides what a test does when something it needs from the
// machine (a control plane, a containerd) is not there: skip with a message
// that names the make target providing it, or, with NODEKIT_REQUIRE_ALL=1,
// fail. It also holds what the tests share: a poll with a deadline
// (Eventually, EventuallyErr), an API request counter (APICounter), a TCP
// proxy, fake file trees and /proc readers. It does not link package
// testing: the interfaces it takes are the parts of testing.TB it uses.
package testenv

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RequireAll reports whether NODEKIT_REQUIRE_ALL=1 is set, in which case a
// missing prerequisite fails the run instead of skipping.
func RequireAll() bool { return os.Getenv("NODEKIT_REQUIRE_ALL") == "1" }

// TB is the part of testing.TB that Missing uses.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Missing skips t (or fails it under NODEKIT_REQUIRE_ALL=1), saying what is
// missing and which make target provides it.
func Missing(t TB, what, target string, cause error) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available (%v); run `make %s` or `make test` to provide it", what, cause, target)
	if RequireAll() {
		t.Fatalf("NODEKIT_REQUIRE_ALL=1: %s", msg)
	}
	t.Skipf("%s", msg)
}

// MissingMain is Missing for TestMain, where there is no *testing.T: it returns
// a message for the skip, or exits the process with status 1 under
// NODEKIT_REQUIRE_ALL=1.
func MissingMain(what, target string, cause error) string {
	msg := fmt.Sprintf("%s is not available (%v); run `make %s` or `make test` to provide it", what, cause, target)
	if RequireAll() {
		fmt.Fprintf(os.Stderr, "NODEKIT_REQUIRE_ALL=1: %s\n", msg)
		os.Exit(1)
	}
	return msg
}

// Metrics gathers reg and returns, by metric name, the value of each
// counter and the sample count of each histogram (of the first series of
// each metric).
func Metrics(t FatalTB, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, mf := range gather(t, reg) {
		m := mf.GetMetric()[0]
		switch {
		case m.Counter != nil:
			got[mf.GetName()] = m.Counter.GetValue()
		case m.Histogram != nil:
			got[mf.GetName()] = float64(m.Histogram.GetSampleCount())
		}
	}
	return got
}

// Histogram is a histogram's sum and sample count.
type Histogram struct {
	Sum   float64
	Count uint64
}

// Histograms gathers reg and returns histogram metric's sums and counts
// by the value of its label (series with the same value added up; series
// without the label left out).
func Histograms(t FatalTB, reg prometheus.Gatherer, metric, label string) map[string]Histogram {
	t.Helper()
	out := map[string]Histogram{}
	for _, mf := range gather(t, reg) {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					h, sum := m.GetHistogram(), out[l.GetValue()]
					out[l.GetValue()] = Histogram{Sum: sum.Sum + h.GetSampleSum(), Count: sum.Count + h.GetSampleCount()}
				}
			}
		}
	}
	return out
}

// gather gathers reg, failing t when it cannot.
func gather(t FatalTB, reg prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	return mfs
}

// FatalTB is the part of testing.TB that Metrics and Histograms use.
type FatalTB interface {
	Helper()
	Fatalf(format string, args ...any)
}
