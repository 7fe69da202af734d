package probe

import (
	"context"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Result is the verdict of one probe, or the state a Manager publishes for a
// container's probe.
type Result int8

const (
	// Unknown: no verdict (the probe could not run, or a startup probe has not
	// reached a threshold yet).
	Unknown Result = iota
	// Success: the container passed the probe.
	Success
	// Failure: the container failed the probe.
	Failure
)

// String returns "Unknown", "Success" or "Failure".
func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "Unknown"
	}
}

// Type is the kind of probe: liveness, readiness or startup.
type Type uint8

const (
	// Liveness probes decide whether a container is restarted.
	Liveness Type = iota
	// Readiness probes decide whether a container is Ready.
	Readiness
	// Startup probes gate liveness and readiness until the container started.
	Startup
)

// String returns "Liveness", "Readiness" or "Startup" (the words kubelet puts
// in events and metric labels).
func (t Type) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	default:
		return "Unknown"
	}
}

// Target is what a probe is run against.
type Target struct {
	// Pod owns the container; optional (used for messages only).
	Pod *corev1.Pod
	// Container is the container's spec: named ports are looked up in it and
	// $(VAR) references in exec commands are expanded from its static env.
	// Optional: without it, named ports are an error and no expansion happens.
	Container *corev1.Container
	// ContainerID is the runtime's ID of the container for exec probes, either
	// bare or as in ContainerStatus ("containerd://<id>").
	ContainerID string
	// PodIP is the host that HTTP and TCP probes without a host, and every
	// gRPC probe, connect to.
	PodIP string
}

// Outcome is what one run of a probe found.
type Outcome struct {
	// Result is Success, Failure or Unknown.
	Result Result
	// Message is the probe's output: the exec command's combined output, the
	// HTTP body or failure, the gRPC status. At most MaxOutputBytes long.
	Message string
	// Warning is set on a Success that comes with a warning, such as an HTTP
	// redirect to another host that was not followed.
	Warning bool
	// StatusCode is the HTTP status of an HTTP GET's response; 0 when no
	// response arrived or the probe is not HTTP.
	StatusCode int
	// Err is set, with Result Unknown, when the probe could not be run at all:
	// an invalid spec (unknown named port), a runtime error, a handler panic.
	Err error
}

// Prober runs one probe of one container. Implementations must return once
// ctx ends and should bound their own run by the probe's timeoutSeconds.
type Prober interface {
	Probe(ctx context.Context, spec *corev1.Probe, target Target) Outcome
}

// ProberFunc adapts a function to the Prober interface.
type ProberFunc func(ctx context.Context, spec *corev1.Probe, target Target) Outcome

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, spec *corev1.Probe, target Target) Outcome {
	return f(ctx, spec, target)
}

var _ Prober = ProberFunc(nil)

// MaxOutputBytes bounds Outcome.Message: an HTTP body or an exec command's
// output is cut to this many bytes, as kubelet does (10 KiB).
const MaxOutputBytes = 10 << 10

// MaxResponseHeaderBytes bounds the response headers an HTTP probe reads
// (8 KiB; Go's default, which kubelet keeps, is 10 MiB). A target whose
// headers are larger fails the probe, so that a target sending endless
// headers costs a few KiB per probe, not megabytes.
const MaxResponseHeaderBytes = 8 << 10

var (
	// ErrPanic is matched by Outcome.Err when a handler panicked.
	ErrPanic = errors.New("probe handler panicked")
	// ErrNoHandler is matched by Outcome.Err when a probe has no handler
	// (none of exec, httpGet, tcpSocket, grpc is set).
	ErrNoHandler = errors.New("probe has no handler")
	// ErrInvalidPort is matched by Outcome.Err when a probe's port cannot be
	// resolved: an unknown named port or a number outside 1–65535.
	ErrInvalidPort = errors.New("invalid probe port")
	// ErrNoExecer is matched by Outcome.Err for an exec probe when the Prober
	// was built without an Execer.
	ErrNoExecer = errors.New("no execer for exec probes")
)

// truncate cuts s to MaxOutputBytes.
func truncate(s string) string {
	if len(s) <= MaxOutputBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxOutputBytes], "")
}

// Defaults returns a copy of spec with kubelet's API defaults filled in where
// fields are zero: timeoutSeconds 1, periodSeconds 10, successThreshold 1,
// failureThreshold 3. The API server applies these on creation; static pods
// and hand-built specs may lack them.
func Defaults(spec *corev1.Probe) *corev1.Probe {
	out := spec.DeepCopy()
	if out.TimeoutSeconds <= 0 {
		out.TimeoutSeconds = 1
	}
	if out.PeriodSeconds <= 0 {
		out.PeriodSeconds = 10
	}
	if out.SuccessThreshold <= 0 {
		out.SuccessThreshold = 1
	}
	if out.FailureThreshold <= 0 {
		out.FailureThreshold = 3
	}
	if out.InitialDelaySeconds < 0 {
		out.InitialDelaySeconds = 0
	}
	return out
}
