package promutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	opts := prometheus.CounterOpts{Name: "nodekit_test_total", Help: "A test counter."}
	c := prometheus.NewCounter(opts)
	got, err := Register(nil, c)
	if err != nil || got != c {
		t.Fatalf("Register(nil, c) = %v, %v; want c unregistered", got, err)
	}
	got.Inc() // usable without a registerer

	reg := prometheus.NewRegistry()
	first, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil || again != first {
		t.Errorf("second Register = %v, %v; want the first collector", again, err)
	}
	if _, err := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodekit_test_total", Help: "Other."})); err == nil {
		t.Error("a different collector under the same name registered")
	}
}
