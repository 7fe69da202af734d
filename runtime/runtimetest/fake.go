package runtimetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// Images the fake knows from the start unless Options.Images says otherwise.
const (
	// PauseImage is the fake's sandbox image.
	PauseImage = "registry.k8s.io/pause:3.10"
	// PauseImageSize is PauseImage's size in bytes.
	PauseImageSize = 320_368
	// BusyboxImage is a small image with /bin/sh.
	BusyboxImage = "docker.io/library/busybox:1.36"
	// BusyboxImageSize is BusyboxImage's size in bytes.
	BusyboxImageSize = 2_155_365
)

// Defaults of Options.
const (
	DefaultRuntimeName    = "fake"
	DefaultRuntimeVersion = "1.0.0"
	// Endpoint is what the fake's errors name as their endpoint.
	Endpoint = "fake://runtimetest"
	// StopExitCode is the exit code of a container the fake stops (the code of
	// a process killed by SIGKILL).
	StopExitCode = 137
)

// Options configure a fake Runtime. The zero value of each field means its
// default.
type Options struct {
	// Clock stamps creation, start and finish times. Default clock.RealClock{}.
	Clock clock.PassiveClock
	// RuntimeName is what Version reports. Default "fake".
	RuntimeName string
	// RuntimeVersion is what Version reports. Default "1.0.0".
	RuntimeVersion string
	// Images are the images present at the start, reference to size in bytes.
	// Default (nil): PauseImage and BusyboxImage. An empty map: none.
	Images map[string]uint64
	// NoCallLog turns off the record of calls that Calls returns, for a fake
	// that serves a long-running process (a demo agent), whose log would
	// otherwise grow without end. Default false: every call is recorded.
	NoCallLog bool
	// Hooks are the hooks the fake starts with (see Hooks and SetHooks).
	// Default: none.
	Hooks Hooks
	// RuntimeHandlers are the handlers Status reports and RunPodSandbox
	// accepts (a sandbox asking for another fails as containerd's does).
	// Default: one, the default handler "", without features.
	RuntimeHandlers []*runtimeapi.RuntimeHandler
}

// Call is one call made to the fake.
type Call struct {
	// Method is the Runtime method, for example "StartContainer".
	Method string
	// ID is the sandbox, container or image the call was about, if any.
	ID string
	// Cmd is the command of an ExecSync.
	Cmd []string
}

// ExecScript is what ExecSync returns for the commands it is scripted for.
type ExecScript struct {
	Stdout, Stderr string
	ExitCode       int32
	// Timeout makes ExecSync fail as a command that does not finish in time
	// does: with an error matching runtime.ErrExecTimeout, code
	// DeadlineExceeded.
	Timeout bool
	// Err, when set, is the error ExecSync returns.
	Err error
}

type execRule struct {
	containerID string
	cmd         []string // nil: any command
	script      ExecScript
}

type sandbox struct {
	status *runtimeapi.PodSandboxStatus
	logDir string
	seq    int
}

type container struct {
	status    *runtimeapi.ContainerStatus
	sandboxID string
	seq       int
}

// Runtime is an in-memory runtime.Runtime for tests. Sandboxes and
// containers move through the CRI states (sandbox READY, NOTREADY; container
// CREATED, RUNNING, EXITED) with times from the clock. A test can make a
// container exit (Exit), fail or observe calls of a method (SetHooks), script
// ExecSync (ScriptExec), hand out streaming sessions on a test's server
// (SetStreamURL, StreamRequest), set the runtime's conditions (SetCondition), add
// images (AddImage) and read the calls made (Calls). Nothing runs: a started
// container runs until it is stopped or Exit is called. It is safe for
// concurrent use.
type Runtime struct {
	clock   clock.PassiveClock
	name    string
	version string
	noLog   bool

	mu         sync.Mutex
	seq        int
	sandboxes  map[string]*sandbox
	containers map[string]*container
	images     map[string]*runtimeapi.Image // by ID
	conditions []*runtimeapi.RuntimeCondition
	hooks      Hooks
	handlers   []*runtimeapi.RuntimeHandler // immutable after New
	execs      []execRule
	events     events
	calls      []Call
	config     *runtimeapi.RuntimeConfig
	stats      statsState  // stats.go
	stream     streamState // stream.go
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a fake runtime with the images of opts.Images, ready (its
// RuntimeReady and NetworkReady conditions are true).
func New(opts Options) *Runtime {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RuntimeName == "" {
		opts.RuntimeName = DefaultRuntimeName
	}
	if opts.RuntimeVersion == "" {
		opts.RuntimeVersion = DefaultRuntimeVersion
	}
	if opts.Images == nil {
		opts.Images = map[string]uint64{PauseImage: PauseImageSize, BusyboxImage: BusyboxImageSize}
	}
	if opts.RuntimeHandlers == nil {
		opts.RuntimeHandlers = []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}}
	}
	handlers := make([]*runtimeapi.RuntimeHandler, len(opts.RuntimeHandlers))
	for i, h := range opts.RuntimeHandlers {
		handlers[i] = proto.Clone(h).(*runtimeapi.RuntimeHandler)
	}
	f := &Runtime{
		clock:      opts.Clock,
		name:       opts.RuntimeName,
		version:    opts.RuntimeVersion,
		noLog:      opts.NoCallLog,
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		images:     map[string]*runtimeapi.Image{},
		hooks:      opts.Hooks,
		handlers:   handlers,
		conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		},
	}
	for _, ref := range slices.Sorted(maps.Keys(opts.Images)) {
		f.addImage(ref, opts.Images[ref])
	}
	return f
}

// --- controls ---

// Calls returns the calls made so far, oldest first (none when
// Options.NoCallLog is set).
func (f *Runtime) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Call, len(f.calls))
	copy(out, f.calls)
	return out
}

// CallCount returns how many calls of method (its name, "Status") were
// made so far (none when Options.NoCallLog is set).
func (f *Runtime) CallCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// ResetCalls forgets the calls made so far.
func (f *Runtime) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// ScriptExec makes ExecSync of cmd in containerID return s from now on.
// containerID "" stands for any container and a nil cmd for any command; the
// most specific script wins (container and command, then container, then
// command, then any). Without a script, ExecSync in a running container exits
// 0 with no output.
func (f *Runtime) ScriptExec(containerID string, cmd []string, s ExecScript) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = slices.DeleteFunc(f.execs, func(r execRule) bool {
		return r.containerID == containerID && (r.cmd == nil) == (cmd == nil) && slices.Equal(r.cmd, cmd)
	})
	f.execs = append(f.execs, execRule{containerID: containerID, cmd: slices.Clone(cmd), script: s})
}

// Exit makes a running container exit with code at the clock's current time,
// as if its process had ended: reason "Completed" for 0, "Error" otherwise.
func (f *Runtime) Exit(containerID string, code int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(containerID)
	if err != nil {
		return err
	}
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return status.Errorf(codes.FailedPrecondition, "container %q is in %s state", containerID, c.status.State)
	}
	f.exit(c, code, "")
	return nil
}

// AbortStart makes a created container exit without having started, as
// containerd 2 does with a start whose caller went away mid-call: exit code
// 128, reason StartError, no start time.
func (f *Runtime) AbortStart(containerID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(containerID)
	if err != nil {
		return err
	}
	if c.status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return status.Errorf(codes.FailedPrecondition, "container %q is in %s state", containerID, c.status.State)
	}
	f.exit(c, 128, "StartError")
	return nil
}

// SetCondition sets the runtime condition condType (runtimeapi.RuntimeReady,
// runtimeapi.NetworkReady or another) that Status reports.
func (f *Runtime) SetCondition(condType string, ok bool, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cond := &runtimeapi.RuntimeCondition{Type: condType, Status: ok, Reason: reason, Message: message}
	for i, c := range f.conditions {
		if c.Type == condType {
			f.conditions[i] = cond
			return
		}
	}
	f.conditions = append(f.conditions, cond)
}

// RuntimeConfig returns the configuration last passed to UpdateRuntimeConfig,
// or nil.
func (f *Runtime) RuntimeConfig() *runtimeapi.RuntimeConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.config == nil {
		return nil
	}
	return proto.Clone(f.config).(*runtimeapi.RuntimeConfig)
}

// AddImage adds an image of size bytes under ref (or replaces its size) and
// returns its ID.
func (f *Runtime) AddImage(ref string, size uint64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addImage(ref, size)
}

// --- helpers, called with f.mu held ---

// wrap makes err read like runtime/remote's Client's errors ("cri fake://runtimetest:
// <Method>: <code>: <message>"), keeping its gRPC status. Errors that are
// already a *runtime.Error are left as they are.
func (f *Runtime) wrap(method string, err *error) {
	if *err == nil {
		return
	}
	var re *runtime.Error
	if errors.As(*err, &re) {
		return
	}
	*err = &runtime.Error{Endpoint: Endpoint, Method: method, Err: *err}
}

func (f *Runtime) newID(kind string) (string, int) {
	f.seq++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", kind, f.seq)))
	return hex.EncodeToString(sum[:]), f.seq
}

func (f *Runtime) now() int64 { return f.clock.Now().UnixNano() }

func imageID(ref string) string {
	sum := sha256.Sum256([]byte("image:" + ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (f *Runtime) addImage(ref string, size uint64) string {
	if img := f.findImage(ref); img != nil {
		img.Size = size
		return img.Id
	}
	id := imageID(ref)
	img := &runtimeapi.Image{Id: id, RepoTags: []string{ref}, Size: size, Spec: &runtimeapi.ImageSpec{Image: ref}}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		img.RepoDigests = []string{ref[:i] + "@" + id}
	}
	f.images[id] = img
	return id
}

// findImage finds an image by ID or reference.
func (f *Runtime) findImage(ref string) *runtimeapi.Image {
	if img, ok := f.images[ref]; ok {
		return img
	}
	for _, img := range f.images {
		if slices.Contains(img.RepoTags, ref) || slices.Contains(img.RepoDigests, ref) {
			return img
		}
	}
	return nil
}

// lookup finds an object by full ID or unique prefix, as containerd does.
func lookup[T any](m map[string]T, id string) (T, bool) {
	if v, ok := m[id]; ok || id == "" {
		return v, ok
	}
	var found T
	n := 0
	for k, v := range m {
		if strings.HasPrefix(k, id) {
			found, n = v, n+1
		}
	}
	return found, n == 1
}

func (f *Runtime) sandbox(id string) (*sandbox, error) {
	if s, ok := lookup(f.sandboxes, id); ok {
		return s, nil
	}
	return nil, status.Errorf(codes.NotFound, "an error occurred when try to find sandbox %q: not found", id)
}

func (f *Runtime) container(id string) (*container, error) {
	if c, ok := lookup(f.containers, id); ok {
		return c, nil
	}
	return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: not found", id)
}

func (f *Runtime) exit(c *container, code int32, reason string) {
	c.status.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.status.FinishedAt = f.now()
	c.status.ExitCode = code
	switch {
	case reason != "":
		c.status.Reason = reason
	case code == 0:
		c.status.Reason = "Completed"
	default:
		c.status.Reason = "Error"
	}
	f.emit(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, c.status.Id, c.sandboxID)
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// --- runtime.Runtime ---

// Version reports the fake's name and version and CRI v1.
func (f *Runtime) Version(ctx context.Context) (_ *runtimeapi.VersionResponse, err error) {
	defer f.wrap("Version", &err)
	if hook := f.enter("Version", "", nil).Version; hook != nil {
		if err := hook(ctx); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: f.name, RuntimeVersion: f.version, RuntimeApiVersion: "v1"}, nil
}

// Status reports the conditions set with SetCondition (RuntimeReady and
// NetworkReady true at the start) and Options.RuntimeHandlers.
func (f *Runtime) Status(ctx context.Context, verbose bool) (_ *runtimeapi.StatusResponse, err error) {
	defer f.wrap("Status", &err)
	if hook := f.enter("Status", "", nil).Status; hook != nil {
		if err := hook(ctx, verbose); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := &runtimeapi.RuntimeStatus{}
	for _, c := range f.conditions {
		st.Conditions = append(st.Conditions, proto.Clone(c).(*runtimeapi.RuntimeCondition))
	}
	handlers := make([]*runtimeapi.RuntimeHandler, len(f.handlers))
	for i, h := range f.handlers {
		handlers[i] = proto.Clone(h).(*runtimeapi.RuntimeHandler)
	}
	return &runtimeapi.StatusResponse{
		Status:          st,
		RuntimeHandlers: handlers,
		Features:        &runtimeapi.RuntimeFeatures{},
	}, nil
}

// RunPodSandbox creates a sandbox in state READY. Its metadata must have a
// name, and no other sandbox may have the same name, namespace, UID and
// attempt.
func (f *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (_ string, err error) {
	defer f.wrap("RunPodSandbox", &err)
	if hook := f.enter("RunPodSandbox", "", nil).RunPodSandbox; hook != nil {
		if err := hook(ctx, config, runtimeHandler); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	md := config.GetMetadata()
	if md.GetName() == "" {
		return "", status.Error(codes.InvalidArgument, "sandbox config must include metadata with a name")
	}
	if !slices.ContainsFunc(f.handlers, func(h *runtimeapi.RuntimeHandler) bool { return h.GetName() == runtimeHandler }) {
		return "", status.Errorf(codes.Unknown, "failed to get sandbox runtime: no runtime for %q is configured", runtimeHandler)
	}
	for _, s := range f.sandboxes {
		if proto.Equal(s.status.Metadata, md) {
			return "", status.Errorf(codes.AlreadyExists, "sandbox name %s_%s_%s_%d is reserved for %q", md.Name, md.Namespace, md.Uid, md.Attempt, s.status.Id)
		}
	}
	id, seq := f.newID("sandbox")
	st := &runtimeapi.PodSandboxStatus{
		Id:             id,
		Metadata:       proto.Clone(md).(*runtimeapi.PodSandboxMetadata),
		State:          runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:      f.now(),
		Network:        &runtimeapi.PodSandboxNetworkStatus{},
		Labels:         maps.Clone(config.GetLabels()),
		Annotations:    maps.Clone(config.GetAnnotations()),
		RuntimeHandler: runtimeHandler,
	}
	if ns := config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: proto.Clone(ns).(*runtimeapi.NamespaceOption)}}
	}
	f.sandboxes[id] = &sandbox{status: st, logDir: config.GetLogDirectory(), seq: seq}
	f.emit(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, id, id)
	f.emit(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, id, id)
	return id, nil
}

// StopPodSandbox makes a sandbox NOTREADY and its running containers exit
// with StopExitCode. A sandbox that is gone is not an error.
func (f *Runtime) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer f.wrap("StopPodSandbox", &err)
	if hook := f.enter("StopPodSandbox", id, nil).StopPodSandbox; hook != nil {
		if err := hook(ctx, id); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(id)
	if err != nil {
		return nil
	}
	f.stopSandbox(s)
	return nil
}

func (f *Runtime) stopSandbox(s *sandbox) {
	for _, c := range f.containers {
		if c.sandboxID == s.status.Id && c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			f.exit(c, StopExitCode, "")
		}
	}
	if s.status.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		s.status.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		f.emit(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, s.status.Id, s.status.Id)
	}
}

// RemovePodSandbox removes a sandbox and its containers, stopping them first.
// A sandbox that is gone is not an error.
func (f *Runtime) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer f.wrap("RemovePodSandbox", &err)
	if hook := f.enter("RemovePodSandbox", id, nil).RemovePodSandbox; hook != nil {
		if err := hook(ctx, id); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(id)
	if err != nil {
		return nil
	}
	f.stopSandbox(s)
	for _, c := range f.sortedContainers() {
		if c.sandboxID == s.status.Id {
			delete(f.containers, c.status.Id)
			f.emit(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, c.status.Id, s.status.Id)
		}
	}
	delete(f.sandboxes, s.status.Id)
	f.emit(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, s.status.Id, s.status.Id)
	return nil
}

// PodSandboxStatus inspects a sandbox; a missing one is NotFound.
func (f *Runtime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.PodSandboxStatusResponse, err error) {
	defer f.wrap("PodSandboxStatus", &err)
	if hook := f.enter("PodSandboxStatus", id, nil).PodSandboxStatus; hook != nil {
		if err := hook(ctx, id, verbose); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(id)
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: proto.Clone(s.status).(*runtimeapi.PodSandboxStatus)}
	for _, c := range f.sortedContainers() {
		if c.sandboxID == s.status.Id {
			resp.ContainersStatuses = append(resp.ContainersStatuses, proto.Clone(c.status).(*runtimeapi.ContainerStatus))
		}
	}
	resp.Timestamp = f.now()
	return resp, nil
}

// ListPodSandbox lists sandboxes matching filter (ID or ID prefix, state,
// labels), oldest first.
func (f *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer f.wrap("ListPodSandbox", &err)
	if hook := f.enter("ListPodSandbox", filter.GetId(), nil).ListPodSandbox; hook != nil {
		if err := hook(ctx, filter); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ss := slices.Collect(maps.Values(f.sandboxes))
	slices.SortFunc(ss, func(a, b *sandbox) int { return a.seq - b.seq })
	out := []*runtimeapi.PodSandbox{}
	for _, s := range ss {
		st := s.status
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(st.Id, filter.Id) {
				continue
			}
			if filter.State != nil && filter.State.State != st.State {
				continue
			}
			if !labelsMatch(st.Labels, filter.LabelSelector) {
				continue
			}
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             st.Id,
			Metadata:       proto.Clone(st.Metadata).(*runtimeapi.PodSandboxMetadata),
			State:          st.State,
			CreatedAt:      st.CreatedAt,
			Labels:         maps.Clone(st.Labels),
			Annotations:    maps.Clone(st.Annotations),
			RuntimeHandler: st.RuntimeHandler,
		})
	}
	return out, nil
}

func (f *Runtime) sortedContainers() []*container {
	cs := slices.Collect(maps.Values(f.containers))
	slices.SortFunc(cs, func(a, b *container) int { return a.seq - b.seq })
	return cs
}

// CreateContainer creates a container in state CREATED in a READY sandbox.
// The image must be present, and no other container in the sandbox may have
// the same name and attempt.
func (f *Runtime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer f.wrap("CreateContainer", &err)
	if hook := f.enter("CreateContainer", sandboxID, nil).CreateContainer; hook != nil {
		if err := hook(ctx, sandboxID, config, sandboxConfig); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sandbox(sandboxID)
	if err != nil {
		return "", err
	}
	if s.status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", status.Errorf(codes.FailedPrecondition, "sandbox %q is not ready", s.status.Id)
	}
	md := config.GetMetadata()
	if md.GetName() == "" {
		return "", status.Error(codes.InvalidArgument, "container config must include metadata with a name")
	}
	for _, c := range f.containers {
		if c.sandboxID == s.status.Id && proto.Equal(c.status.Metadata, md) {
			return "", status.Errorf(codes.AlreadyExists, "container name %s_%d is reserved for %q in sandbox %q", md.Name, md.Attempt, c.status.Id, s.status.Id)
		}
	}
	img := f.findImage(config.GetImage().GetImage())
	if img == nil {
		return "", status.Errorf(codes.NotFound, "failed to resolve image %q: not found", config.GetImage().GetImage())
	}
	id, seq := f.newID("container")
	st := &runtimeapi.ContainerStatus{
		Id:          id,
		Metadata:    proto.Clone(md).(*runtimeapi.ContainerMetadata),
		State:       runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt:   f.now(),
		Image:       proto.Clone(config.GetImage()).(*runtimeapi.ImageSpec),
		ImageRef:    img.Id,
		ImageId:     img.Id,
		Labels:      maps.Clone(config.GetLabels()),
		Annotations: maps.Clone(config.GetAnnotations()),
	}
	for _, m := range config.GetMounts() {
		st.Mounts = append(st.Mounts, proto.Clone(m).(*runtimeapi.Mount))
	}
	if config.GetLogPath() != "" && s.logDir != "" {
		st.LogPath = s.logDir + "/" + config.GetLogPath()
	}
	f.containers[id] = &container{status: st, sandboxID: s.status.Id, seq: seq}
	f.emit(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, id, s.status.Id)
	return id, nil
}

// StartContainer makes a CREATED container RUNNING; its sandbox must be
// READY.
func (f *Runtime) StartContainer(ctx context.Context, id string) (err error) {
	defer f.wrap("StartContainer", &err)
	if hook := f.enter("StartContainer", id, nil).StartContainer; hook != nil {
		if err := hook(ctx, id); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	if c.status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return status.Errorf(codes.FailedPrecondition, "container %q is in %s state", c.status.Id, c.status.State)
	}
	if s := f.sandboxes[c.sandboxID]; s == nil || s.status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return status.Errorf(codes.FailedPrecondition, "sandbox %q of container %q is not ready", c.sandboxID, c.status.Id)
	}
	c.status.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.status.StartedAt = f.now()
	f.emit(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, c.status.Id, c.sandboxID)
	return nil
}

// StopContainer makes a RUNNING container exit with StopExitCode at once (the
// fake's processes never need the grace period). As in containerd, a
// container that is not running is left as it is, and one that is gone is
// not an error.
func (f *Runtime) StopContainer(ctx context.Context, id string, timeout time.Duration) (err error) {
	defer f.wrap("StopContainer", &err)
	if hook := f.enter("StopContainer", id, nil).StopContainer; hook != nil {
		if err := hook(ctx, id, timeout); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return nil
	}
	if c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		f.exit(c, StopExitCode, "")
	}
	return nil
}

// RemoveContainer removes a container, stopping it first if it runs. A
// container that is gone is not an error.
func (f *Runtime) RemoveContainer(ctx context.Context, id string) (err error) {
	defer f.wrap("RemoveContainer", &err)
	if hook := f.enter("RemoveContainer", id, nil).RemoveContainer; hook != nil {
		if err := hook(ctx, id); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return nil
	}
	delete(f.containers, c.status.Id)
	f.emit(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, c.status.Id, c.sandboxID)
	return nil
}

// ListContainers lists containers matching filter (ID or ID prefix, state,
// sandbox, labels), oldest first.
func (f *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer f.wrap("ListContainers", &err)
	if hook := f.enter("ListContainers", filter.GetId(), nil).ListContainers; hook != nil {
		if err := hook(ctx, filter); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []*runtimeapi.Container{}
	for _, c := range f.sortedContainers() {
		st := c.status
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(st.Id, filter.Id) {
				continue
			}
			if filter.State != nil && filter.State.State != st.State {
				continue
			}
			if filter.PodSandboxId != "" && !strings.HasPrefix(c.sandboxID, filter.PodSandboxId) {
				continue
			}
			if !labelsMatch(st.Labels, filter.LabelSelector) {
				continue
			}
		}
		out = append(out, &runtimeapi.Container{
			Id:           st.Id,
			PodSandboxId: c.sandboxID,
			Metadata:     proto.Clone(st.Metadata).(*runtimeapi.ContainerMetadata),
			Image:        proto.Clone(st.Image).(*runtimeapi.ImageSpec),
			ImageRef:     st.ImageRef,
			ImageId:      st.ImageId,
			State:        st.State,
			CreatedAt:    st.CreatedAt,
			Labels:       maps.Clone(st.Labels),
			Annotations:  maps.Clone(st.Annotations),
		})
	}
	return out, nil
}

// ContainerStatus inspects a container; a missing one is NotFound.
func (f *Runtime) ContainerStatus(ctx context.Context, id string, verbose bool) (_ *runtimeapi.ContainerStatusResponse, err error) {
	defer f.wrap("ContainerStatus", &err)
	if hook := f.enter("ContainerStatus", id, nil).ContainerStatus; hook != nil {
		if err := hook(ctx, id, verbose); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(c.status).(*runtimeapi.ContainerStatus)}, nil
}

// UpdateRuntimeConfig keeps config for RuntimeConfig to return.
func (f *Runtime) UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) (err error) {
	defer f.wrap("UpdateRuntimeConfig", &err)
	if hook := f.enter("UpdateRuntimeConfig", config.GetNetworkConfig().GetPodCidr(), nil).UpdateRuntimeConfig; hook != nil {
		if err := hook(ctx, config); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.config = proto.Clone(config).(*runtimeapi.RuntimeConfig)
	return nil
}

// UpdateContainerResources sets the resources that ContainerStatus reports of
// a CREATED or RUNNING container; other states fail as in containerd.
func (f *Runtime) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.ContainerResources) (err error) {
	defer f.wrap("UpdateContainerResources", &err)
	if hook := f.enter("UpdateContainerResources", id, nil).UpdateContainerResources; hook != nil {
		if err := hook(ctx, id, resources); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	if st := c.status.State; st != runtimeapi.ContainerState_CONTAINER_CREATED && st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return status.Errorf(codes.Unknown, "container %q is in %s state", c.status.Id, st)
	}
	if resources == nil {
		c.status.Resources = nil
	} else {
		c.status.Resources = proto.Clone(resources).(*runtimeapi.ContainerResources)
	}
	return nil
}

// ReopenContainerLog succeeds for a RUNNING container and fails for others,
// as in containerd ("container must be in running state").
func (f *Runtime) ReopenContainerLog(ctx context.Context, id string) (err error) {
	defer f.wrap("ReopenContainerLog", &err)
	if hook := f.enter("ReopenContainerLog", id, nil).ReopenContainerLog; hook != nil {
		if err := hook(ctx, id); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return err
	}
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return status.Error(codes.Unknown, "container must be in running state")
	}
	return nil
}

// ExecSync returns what ScriptExec scripted for the container and command,
// or exit code 0 with no output. The container must be RUNNING: otherwise the
// error is like containerd's ("container is in CONTAINER_EXITED state").
func (f *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (_ *runtime.ExecResult, err error) {
	defer f.wrap("ExecSync", &err)
	if hook := f.enter("ExecSync", id, slices.Clone(cmd)).ExecSync; hook != nil {
		if err := hook(ctx, id, cmd, timeout); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.container(id)
	if err != nil {
		return nil, err
	}
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.Unknown, "container is in %s state", c.status.State)
	}
	s := f.script(c.status.Id, cmd)
	switch {
	case s.Err != nil:
		return nil, s.Err
	case s.Timeout:
		return nil, runtime.NewExecTimeoutError(Endpoint,
			status.Errorf(codes.DeadlineExceeded, "timeout %v exceeded: context deadline exceeded", timeout))
	}
	return &runtime.ExecResult{Stdout: []byte(s.Stdout), Stderr: []byte(s.Stderr), ExitCode: s.ExitCode}, nil
}

// script finds the most specific script for a command in a container.
func (f *Runtime) script(id string, cmd []string) ExecScript {
	best, bestRank := ExecScript{}, 0
	for _, r := range f.execs {
		rank := 0
		switch {
		case r.containerID == id && r.cmd != nil && slices.Equal(r.cmd, cmd):
			rank = 4
		case r.containerID == id && r.cmd == nil:
			rank = 3
		case r.containerID == "" && r.cmd != nil && slices.Equal(r.cmd, cmd):
			rank = 2
		case r.containerID == "" && r.cmd == nil:
			rank = 1
		}
		if rank > bestRank {
			best, bestRank = r.script, rank
		}
	}
	return best
}

// ListImages lists the images matching filter (by reference or ID), in
// reference order.
func (f *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) (_ []*runtimeapi.Image, err error) {
	defer f.wrap("ListImages", &err)
	if hook := f.enter("ListImages", filter.GetImage().GetImage(), nil).ListImages; hook != nil {
		if err := hook(ctx, filter); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []*runtimeapi.Image{}
	if ref := filter.GetImage().GetImage(); ref != "" {
		if img := f.findImage(ref); img != nil {
			out = append(out, proto.Clone(img).(*runtimeapi.Image))
		}
		return out, nil
	}
	for _, img := range f.images {
		out = append(out, proto.Clone(img).(*runtimeapi.Image))
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Image) int { return strings.Compare(a.RepoTags[0], b.RepoTags[0]) })
	return out, nil
}

// ImageStatus inspects an image; a missing image has a nil Image.
func (f *Runtime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (_ *runtimeapi.ImageStatusResponse, err error) {
	defer f.wrap("ImageStatus", &err)
	if hook := f.enter("ImageStatus", image.GetImage(), nil).ImageStatus; hook != nil {
		if err := hook(ctx, image, verbose); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &runtimeapi.ImageStatusResponse{}
	if img := f.findImage(image.GetImage()); img != nil {
		resp.Image = proto.Clone(img).(*runtimeapi.Image)
	}
	return resp, nil
}

// PullImage returns the ID of the image, adding it with size 0 when it is
// not present.
func (f *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer f.wrap("PullImage", &err)
	if hook := f.enter("PullImage", image.GetImage(), nil).PullImage; hook != nil {
		if err := hook(ctx, image, auth, sandboxConfig); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if image.GetImage() == "" {
		return "", status.Error(codes.InvalidArgument, "image reference is empty")
	}
	if img := f.findImage(image.GetImage()); img != nil {
		return img.Id, nil
	}
	return f.addImage(image.GetImage(), 0), nil
}

// RemoveImage removes an image; one that is gone is not an error.
func (f *Runtime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) (err error) {
	defer f.wrap("RemoveImage", &err)
	if hook := f.enter("RemoveImage", image.GetImage(), nil).RemoveImage; hook != nil {
		if err := hook(ctx, image); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if img := f.findImage(image.GetImage()); img != nil {
		delete(f.images, img.Id)
	}
	return nil
}

// ImageFsInfo reports one image file system whose usage is the sum of the
// images' sizes, with one inode per image.
func (f *Runtime) ImageFsInfo(ctx context.Context) (_ *runtimeapi.ImageFsInfoResponse, err error) {
	defer f.wrap("ImageFsInfo", &err)
	if hook := f.enter("ImageFsInfo", "", nil).ImageFsInfo; hook != nil {
		if err := hook(ctx); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var used uint64
	for _, img := range f.images {
		used += img.Size
	}
	fs := &runtimeapi.FilesystemUsage{
		Timestamp:  f.now(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/fake/images"},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(f.images))},
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}
