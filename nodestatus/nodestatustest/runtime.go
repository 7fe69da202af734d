package nodestatustest

import (
	"context"
	"fmt"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/nodestatus"
)

// Runtime is a nodestatus.RuntimeInfo with a settable version, status and
// image list. NewRuntime's runtime is ready, its network is ready, and it
// has no images. The responses it returns are shared: do not modify them.
type Runtime struct {
	mu         sync.Mutex
	version    *runtimeapi.VersionResponse
	conditions []*runtimeapi.RuntimeCondition // RuntimeReady, NetworkReady
	handlers   []*runtimeapi.RuntimeHandler
	features   *runtimeapi.RuntimeFeatures
	status     *runtimeapi.StatusResponse
	images     []*runtimeapi.Image

	versionErr, statusErr, imagesErr error
}

var _ nodestatus.RuntimeInfo = (*Runtime)(nil)

// NewRuntime returns a ready runtime called "fake", version "0.1.0".
func NewRuntime() *Runtime {
	r := &Runtime{conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	r.SetVersion("fake", "0.1.0")
	r.rebuild()
	return r
}

// Version returns the runtime's name and version.
func (r *Runtime) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.version, r.versionErr
}

// Status returns the runtime's conditions, handlers and features.
func (r *Runtime) Status(ctx context.Context, _ bool) (*runtimeapi.StatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.statusErr != nil {
		return nil, r.statusErr
	}
	return r.status, nil
}

// ListImages returns the images; the filter is ignored.
func (r *Runtime) ListImages(ctx context.Context, _ *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.imagesErr != nil {
		return nil, r.imagesErr
	}
	return r.images, nil
}

// SetVersion sets the runtime's name and version.
func (r *Runtime) SetVersion(name, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.version = &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: name, RuntimeVersion: version, RuntimeApiVersion: "v1"}
}

// SetRuntimeReady sets the RuntimeReady condition.
func (r *Runtime) SetRuntimeReady(ready bool, reason, message string) {
	r.setCondition(0, ready, reason, message)
}

// SetNetworkReady sets the NetworkReady condition.
func (r *Runtime) SetNetworkReady(ready bool, reason, message string) {
	r.setCondition(1, ready, reason, message)
}

func (r *Runtime) setCondition(i int, ok bool, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conditions[i] = &runtimeapi.RuntimeCondition{Type: r.conditions[i].Type, Status: ok, Reason: reason, Message: message}
	r.rebuild()
}

// SetHandlers sets the runtime handlers Status reports.
func (r *Runtime) SetHandlers(handlers ...*runtimeapi.RuntimeHandler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers = handlers
	r.rebuild()
}

// SetFeatures sets the runtime features Status reports (nil: none).
func (r *Runtime) SetFeatures(f *runtimeapi.RuntimeFeatures) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.features = f
	r.rebuild()
}

// SetImages sets the images ListImages returns. The slice is kept; do not
// modify it afterwards.
func (r *Runtime) SetImages(images []*runtimeapi.Image) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images = images
}

// SetErrors makes Version, Status and ListImages fail with the given errors
// (nil: succeed).
func (r *Runtime) SetErrors(version, status, images error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versionErr, r.statusErr, r.imagesErr = version, status, images
}

func (r *Runtime) rebuild() {
	r.status = &runtimeapi.StatusResponse{
		Status:          &runtimeapi.RuntimeStatus{Conditions: append([]*runtimeapi.RuntimeCondition(nil), r.conditions...)},
		RuntimeHandlers: r.handlers,
		Features:        r.features,
	}
}

// Images returns n distinct images of different sizes (the i-th is
// (i+1) MiB), each with one tag and one digest, for simulated nodes and
// benchmarks.
func Images(n int) []*runtimeapi.Image {
	out := make([]*runtimeapi.Image, n)
	for i := range out {
		out[i] = &runtimeapi.Image{
			Id:          fmt.Sprintf("sha256:%064x", i+1),
			RepoTags:    []string{fmt.Sprintf("registry.example/app-%d:v1", i)},
			RepoDigests: []string{fmt.Sprintf("registry.example/app-%d@sha256:%064x", i, i+1)},
			Size:        uint64(i+1) << 20,
		}
	}
	return out
}
