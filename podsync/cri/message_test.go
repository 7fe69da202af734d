package cri

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/runtime"
)

// Waiting messages carry what the runtime said, without the endpoint,
// method and code runtime.Error puts in front, as the kubelet's do.
func TestRuntimeMessage(t *testing.T) {
	err := &runtime.Error{Endpoint: "unix:///run/c.sock", Method: "CreateContainer",
		Err: status.Error(codes.Unknown, "failed to create containerd container: cannot load seccomp profile")}
	if got := runtimeMessage(err); got != "failed to create containerd container: cannot load seccomp profile" {
		t.Errorf("runtimeMessage = %q", got)
	}
	if got := runtimeMessage(errors.New("local")); got != "local" {
		t.Errorf("runtimeMessage of a local error = %q", got)
	}
}
