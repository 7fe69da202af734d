package runtimetest

import (
	"context"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Hooks are called at the start of the fake's methods, one field per method
// of runtime.Runtime (and WatchContainerEvents), with the method's arguments.
// A hook that returns an error fails the call with that error (with its gRPC
// status kept, and named like remote.Client's errors) before the fake does
// anything; one that returns nil lets the call go on, so a hook can also just
// observe. A nil field does nothing. Hooks run on the caller's goroutine
// without the fake's lock held, so they may call the fake; the call is
// already in Calls when its hook runs. A hook must be safe for concurrent use
// when the code under test calls the method concurrently (Errors is).
type Hooks struct {
	Version                  func(ctx context.Context) error
	Status                   func(ctx context.Context, verbose bool) error
	UpdateRuntimeConfig      func(ctx context.Context, config *runtimeapi.RuntimeConfig) error
	RunPodSandbox            func(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) error
	StopPodSandbox           func(ctx context.Context, podSandboxID string) error
	RemovePodSandbox         func(ctx context.Context, podSandboxID string) error
	PodSandboxStatus         func(ctx context.Context, podSandboxID string, verbose bool) error
	ListPodSandbox           func(ctx context.Context, filter *runtimeapi.PodSandboxFilter) error
	CreateContainer          func(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) error
	StartContainer           func(ctx context.Context, containerID string) error
	StopContainer            func(ctx context.Context, containerID string, timeout time.Duration) error
	RemoveContainer          func(ctx context.Context, containerID string) error
	ListContainers           func(ctx context.Context, filter *runtimeapi.ContainerFilter) error
	ContainerStatus          func(ctx context.Context, containerID string, verbose bool) error
	UpdateContainerResources func(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error
	ReopenContainerLog       func(ctx context.Context, containerID string) error
	ExecSync                 func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) error
	Exec                     func(ctx context.Context, req *runtimeapi.ExecRequest) error
	Attach                   func(ctx context.Context, req *runtimeapi.AttachRequest) error
	PortForward              func(ctx context.Context, req *runtimeapi.PortForwardRequest) error
	ListImages               func(ctx context.Context, filter *runtimeapi.ImageFilter) error
	ImageStatus              func(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) error
	PullImage                func(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) error
	RemoveImage              func(ctx context.Context, image *runtimeapi.ImageSpec) error
	ImageFsInfo              func(ctx context.Context) error
	ContainerStats           func(ctx context.Context, containerID string) error
	ListContainerStats       func(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) error
	PodSandboxStats          func(ctx context.Context, podSandboxID string) error
	ListPodSandboxStats      func(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) error
	WatchContainerEvents     func(ctx context.Context, fn func(*runtimeapi.ContainerEventResponse)) error
}

// SetHooks replaces the hooks of the fake with h from the next call on;
// SetHooks(Hooks{}) clears them.
func (f *Runtime) SetHooks(h Hooks) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks = h
}

// Errors returns a function that returns errs one per call, in order, and nil
// once they are used up, for a hook that fails the next len(errs) calls:
//
//	next := runtimetest.Errors(errUnavailable)
//	fake.SetHooks(runtimetest.Hooks{
//		StartContainer: func(context.Context, string) error { return next() },
//	})
//
// It is safe for concurrent use.
func Errors(errs ...error) func() error {
	var mu sync.Mutex
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) == 0 {
			return nil
		}
		err := errs[0]
		errs = errs[1:]
		return err
	}
}

// enter records a call of method (unless Options.NoCallLog is set) and
// returns the hooks to call for it.
func (f *Runtime) enter(method, id string, cmd []string) Hooks {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.noLog {
		f.calls = append(f.calls, Call{Method: method, ID: id, Cmd: cmd})
	}
	return f.hooks
}
