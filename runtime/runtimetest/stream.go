package runtimetest

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamState is what the fake keeps of the streaming sessions it handed
// out, guarded by Runtime.mu.
type streamState struct {
	baseURL string
	seq     int
	reqs    map[string]proto.Message // by token
}

// SetStreamURL sets the base URL of the streaming server that Exec, Attach
// and PortForward hand out sessions on: they return
// <base>/exec/<token>, <base>/attach/<token> and <base>/portforward/<token>,
// and StreamRequest(token) tells that server what a session is for. Until
// it is set (or after SetStreamURL("")) the three calls answer
// Unimplemented, as a runtime without a streaming server would.
func (f *Runtime) SetStreamURL(base string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stream.baseURL = strings.TrimSuffix(base, "/")
}

// StreamRequest returns the request a streaming URL was handed out for:
// an *ExecRequest, *AttachRequest or *PortForwardRequest (a copy). The
// argument is the URL, its path, or the token that ends it. A session may
// be opened any number of times: the fake does not expire them.
func (f *Runtime) StreamRequest(urlOrToken string) (proto.Message, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.stream.reqs[path.Base(urlOrToken)]
	if !ok {
		return nil, false
	}
	return proto.Clone(r), true
}

// newStream records req under a new token and returns its URL.
func (f *Runtime) newStream(kind string, req proto.Message) (string, error) {
	if f.stream.baseURL == "" {
		return "", status.Error(codes.Unimplemented, "no streaming server: call SetStreamURL")
	}
	if f.stream.reqs == nil {
		f.stream.reqs = map[string]proto.Message{}
	}
	f.stream.seq++
	token := fmt.Sprintf("%s%d", kind, f.stream.seq)
	f.stream.reqs[token] = proto.Clone(req)
	return f.stream.baseURL + "/" + kind + "/" + token, nil
}

// checkStreams refuses what a CRI streaming server refuses: no stream at
// all, and a TTY with a separate stderr.
func checkStreams(stdin, stdout, stderr, tty bool) error {
	if !stdin && !stdout && !stderr {
		return status.Error(codes.InvalidArgument, "one of stdin, stdout, or stderr must be set")
	}
	if tty && stderr {
		return status.Error(codes.InvalidArgument, "tty and stderr cannot both be true")
	}
	return nil
}

// runningContainer finds a container that must be RUNNING, as containerd
// requires for exec and attach.
func (f *Runtime) runningContainer(id string) error {
	c, err := f.container(id)
	if err != nil {
		return err
	}
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return status.Errorf(codes.Unknown, "container is in %s state", c.status.State)
	}
	return nil
}

// Exec hands out a streaming URL for req.Cmd in a running container (see
// SetStreamURL). A missing container is NotFound; one not running, no
// command, or streams a CRI server refuses are errors.
func (f *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (_ string, err error) {
	defer f.wrap("Exec", &err)
	if hook := f.enter("Exec", req.GetContainerId(), slices.Clone(req.GetCmd())).Exec; hook != nil {
		if err := hook(ctx, req); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.runningContainer(req.GetContainerId()); err != nil {
		return "", err
	}
	if len(req.GetCmd()) == 0 {
		return "", status.Error(codes.InvalidArgument, "cmd must not be empty")
	}
	if err := checkStreams(req.Stdin, req.Stdout, req.Stderr, req.Tty); err != nil {
		return "", err
	}
	return f.newStream("exec", req)
}

// Attach hands out a streaming URL for an attachment to a running
// container (see SetStreamURL).
func (f *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (_ string, err error) {
	defer f.wrap("Attach", &err)
	if hook := f.enter("Attach", req.GetContainerId(), nil).Attach; hook != nil {
		if err := hook(ctx, req); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.runningContainer(req.GetContainerId()); err != nil {
		return "", err
	}
	if err := checkStreams(req.Stdin, req.Stdout, req.Stderr, req.Tty); err != nil {
		return "", err
	}
	return f.newStream("attach", req)
}

// PortForward hands out a streaming URL for forwarding into a ready
// sandbox (see SetStreamURL). A missing sandbox is NotFound; one not
// ready is an error.
func (f *Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (_ string, err error) {
	defer f.wrap("PortForward", &err)
	if hook := f.enter("PortForward", req.GetPodSandboxId(), nil).PortForward; hook != nil {
		if err := hook(ctx, req); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(req.GetPodSandboxId())
	if err != nil {
		return "", err
	}
	if s.status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", status.Errorf(codes.FailedPrecondition, "pod sandbox %q is not running", s.status.Id)
	}
	return f.newStream("portforward", req)
}
