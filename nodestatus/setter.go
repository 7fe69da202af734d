package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// StatusSetter sets its part of a node's status in place. It must not touch
// fields or condition types that it does not own, so that what other setters
// and other agents wrote survives.
type StatusSetter interface {
	SetStatus(ctx context.Context, node *corev1.Node) error
}

// StatusSetterFunc adapts a function to a StatusSetter.
type StatusSetterFunc func(ctx context.Context, node *corev1.Node) error

// SetStatus calls f.
func (f StatusSetterFunc) SetStatus(ctx context.Context, node *corev1.Node) error {
	return f(ctx, node)
}

var _ StatusSetter = StatusSetterFunc(nil)

// Named is a StatusSetter with a name, so that a list of setters can be edited
// by name and its errors say which setter failed.
type Named struct {
	Name string
	StatusSetter
}

// Setters is an ordered list of named setters. It is itself a StatusSetter: it
// runs every setter in order, even after one fails, and returns the failures
// joined, each prefixed with the setter's name.
type Setters []Named

var _ StatusSetter = Setters(nil)

// SetStatus runs every setter on node in order, as one pass (see Run). The
// pass's time is read when it begins from the clock of the list's default
// setters (Options.Clock of DefaultSetters), or from the real clock when the
// list has none of them. Called from within a pass (a Setters list inside
// another), it joins that pass.
func (s Setters) SetStatus(ctx context.Context, node *corev1.Node) error {
	if inPass(ctx) {
		return s.run(ctx, node)
	}
	return s.run(newPass(ctx, s.clock().Now()), node)
}

// Run runs every setter on node in order, as one pass whose time is now:
// setters read it with Now(ctx), and the default setters stamp their
// conditions with it. Within a pass, setters that share a source (the host's
// facts, the runtime's version, status and images) ask it once. A failing
// setter does not stop the others; the failures are returned joined.
func (s Setters) Run(ctx context.Context, node *corev1.Node, now time.Time) error {
	return s.run(newPass(ctx, now), node)
}

// clocked is implemented by the default setters that read a clock.
type clocked interface{ passClock() clock.PassiveClock }

// clock returns the clock of the first setter in s that has one.
func (s Setters) clock() clock.PassiveClock {
	for _, n := range s {
		if c, ok := n.StatusSetter.(clocked); ok {
			return c.passClock()
		}
	}
	return clock.RealClock{}
}

func (s Setters) run(ctx context.Context, node *corev1.Node) error {
	var errs []error
	for _, n := range s {
		if err := n.SetStatus(ctx, node); err != nil {
			errs = append(errs, &SetterError{Setter: n.Name, Err: err})
		}
	}
	return errors.Join(errs...)
}

// Index returns the position of the setter called name, or -1.
func (s Setters) Index(name string) int {
	for i, n := range s {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// Replace returns a copy of s with the setter called name replaced by setter.
// It returns an error when there is no such setter.
func (s Setters) Replace(name string, setter StatusSetter) (Setters, error) {
	i := s.Index(name)
	if i < 0 {
		return nil, fmt.Errorf("nodestatus: no setter named %q", name)
	}
	out := append(Setters(nil), s...)
	out[i] = Named{Name: name, StatusSetter: setter}
	return out, nil
}

// Remove returns a copy of s without the setter called name. It returns an
// error when there is no such setter.
func (s Setters) Remove(name string) (Setters, error) {
	i := s.Index(name)
	if i < 0 {
		return nil, fmt.Errorf("nodestatus: no setter named %q", name)
	}
	out := append(Setters(nil), s[:i]...)
	return append(out, s[i+1:]...), nil
}

// InsertBefore returns a copy of s with n placed just before the setter called
// name. It returns an error when there is no such setter or n's name is taken.
func (s Setters) InsertBefore(name string, n Named) (Setters, error) {
	return s.insert(name, n, 0)
}

// InsertAfter returns a copy of s with n placed just after the setter called
// name. It returns an error when there is no such setter or n's name is taken.
func (s Setters) InsertAfter(name string, n Named) (Setters, error) {
	return s.insert(name, n, 1)
}

func (s Setters) insert(name string, n Named, offset int) (Setters, error) {
	if s.Index(n.Name) >= 0 {
		return nil, fmt.Errorf("nodestatus: a setter named %q is already in the list", n.Name)
	}
	i := s.Index(name)
	if i < 0 {
		return nil, fmt.Errorf("nodestatus: no setter named %q", name)
	}
	i += offset
	out := make(Setters, 0, len(s)+1)
	out = append(out, s[:i]...)
	out = append(out, n)
	return append(out, s[i:]...), nil
}

// SetterError is a failure of one named setter.
type SetterError struct {
	Setter string
	Err    error
}

func (e *SetterError) Error() string { return "setter " + e.Setter + ": " + e.Err.Error() }

// Unwrap returns the setter's own error.
func (e *SetterError) Unwrap() error { return e.Err }
