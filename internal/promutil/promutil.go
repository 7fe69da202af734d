// Package promutil registers nodekit's metrics, the one way every package
// does it.
//
// The rule: a package's metrics are registered through its
// Options.Registerer with Register, idempotently, and a nil Registerer means
// no metrics. Register then returns the collector unregistered, so a package
// builds and updates its metrics the same way whether or not anyone collects
// them: no nil Registerer or nil metrics checks anywhere else. A registration
// error is returned by the package's constructor as
// "<pkg>: Options.Registerer: <err>".
package promutil

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg, or returns the collector already registered
// under the same description, so that many instances sharing one registerer
// (a fleet of simulated nodes) share their metrics. With a nil reg it returns
// c, unregistered.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, err
}
