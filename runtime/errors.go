package runtime

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
)

// Error is the error every runtime/remote Client call returns when it fails
// (the fake in runtime/runtimetest returns it too). It names the
// runtime endpoint and the CRI method, and keeps the runtime's gRPC status:
// status.Code, status.FromError, errors.As and errors.Is all see through it.
// When the call's context ended, errors.Is also matches context.Canceled or
// context.DeadlineExceeded.
type Error struct {
	// Endpoint is the runtime endpoint the call went to ("unix:///...").
	Endpoint string
	// Method is the CRI method that failed, for example "ListContainers".
	Method string
	// Err is what failed: a gRPC status error from the runtime or from the
	// connection, or a local error.
	Err error

	ctxErr      error // the call's context error, when it had ended
	execTimeout bool  // an ExecSync that did not finish in time
}

// Error returns "cri <endpoint>: <method>: <code>: <message>".
func (e *Error) Error() string {
	var msg string
	if s, ok := status.FromError(e.Err); ok && s != nil {
		msg = s.Code().String() + ": " + s.Message()
	} else if e.Err != nil {
		msg = e.Err.Error()
	}
	return "cri " + e.Endpoint + ": " + e.Method + ": " + msg
}

// Unwrap returns the underlying error and, when the call's context had ended,
// its context error.
func (e *Error) Unwrap() []error {
	if e.ctxErr != nil {
		return []error{e.Err, e.ctxErr}
	}
	return []error{e.Err}
}

// Is reports whether target is ErrExecTimeout and e is an ExecSync that timed
// out.
func (e *Error) Is(target error) bool {
	return e.execTimeout && target == ErrExecTimeout
}

// GRPCStatus returns the gRPC status of the underlying error, so status.Code
// and status.FromError report the runtime's code and message. An underlying
// error without a status is codes.Unknown.
func (e *Error) GRPCStatus() *status.Status {
	return status.Convert(e.Err)
}

// Code returns the gRPC code of err, seeing through wrapping: codes.OK for
// nil, codes.Unknown for an error that carries no status.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	return status.Code(err)
}

// IsNotFound reports whether err says the object asked for does not exist
// (gRPC code NotFound), as PodSandboxStatus and ContainerStatus return for a
// missing sandbox or container.
func IsNotFound(err error) bool { return Code(err) == codes.NotFound }

// IsUnimplemented reports whether err says the runtime does not implement the
// method called (gRPC code Unimplemented), as older runtimes answer for newer
// CRI methods.
func IsUnimplemented(err error) bool { return Code(err) == codes.Unimplemented }

// IsUnavailable reports whether err says the runtime could not be reached
// (gRPC code Unavailable), for example because it is down or restarting.
func IsUnavailable(err error) bool { return Code(err) == codes.Unavailable }

// NewExecTimeoutError returns an error for an ExecSync on endpoint that did not
// finish in time: it matches ErrExecTimeout with errors.Is and has gRPC code
// DeadlineExceeded. Other Runtime implementations (fakes, proxies) use it to
// report exec timeouts the way runtime/remote's Client does.
func NewExecTimeoutError(endpoint string, cause error) error {
	if cause == nil || status.Code(cause) != codes.DeadlineExceeded {
		msg := "command did not finish in time"
		if cause != nil {
			msg = cause.Error()
		}
		cause = status.Error(codes.DeadlineExceeded, msg)
	}
	return &Error{Endpoint: endpoint, Method: "ExecSync", Err: cause, execTimeout: true}
}

// WrapError returns the *Error for a call of method on endpoint, made under
// ctx, that failed with err: when ctx had ended (or its deadline had passed,
// whoever reported it), errors.Is also matches ctx's error; an ExecSync that
// failed with DeadlineExceeded also matches ErrExecTimeout. It is how
// runtime/remote's Client builds its errors, for other Runtime
// implementations that talk to a runtime (proxies) to build them alike. It
// runs only on failure, so the success path allocates nothing for errors.
func WrapError(ctx context.Context, endpoint, method string, err error) error {
	e := &Error{Endpoint: endpoint, Method: method, Err: err}
	code := status.Code(err)
	e.execTimeout = method == "ExecSync" && code == codes.DeadlineExceeded
	cerr := ctx.Err()
	if cerr == nil && code == codes.DeadlineExceeded {
		// The answer can beat the context's own timer: a deadline that
		// has passed is the context's, whoever reported it.
		if dl, ok := ctx.Deadline(); ok && !wallClock.Now().Before(dl.Add(-deadlineSlack)) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil && !errors.Is(err, cerr) {
		e.ctxErr = cerr
	}
	return e
}

// wallClock reads the time that context deadlines are set in.
var wallClock clock.PassiveClock = clock.RealClock{}

// deadlineSlack is how close to its deadline a context counts as expired.
const deadlineSlack = time.Millisecond
