package runtimetest

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// MaxPendingEvents is how many events a container event stream may have
// queued and not yet handed to its reader; one more ends the stream with
// ResourceExhausted, so a reader that stopped reading cannot make the fake
// grow without end.
const MaxPendingEvents = 10000

var _ runtime.ContainerEventWatcher = (*Runtime)(nil)

// events are the fake's container event streams (CRI GetContainerEvents).
// Guarded by Runtime.mu.
type events struct {
	off  bool
	subs map[*eventSub]struct{}
}

// eventSub is one open stream: a queue its reader drains, a 1-slot wake-up
// and, once set, the error that ends it.
type eventSub struct {
	queue []*runtimeapi.ContainerEventResponse
	wake  chan struct{}
	end   error
	ended bool
}

func (s *eventSub) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// SetContainerEvents turns the fake's container events on (the default, as
// containerd 2) or off: while off, WatchContainerEvents answers
// Unimplemented, as containerd 1.6 does. Streams already open are left as
// they are; EndContainerEvents ends them.
func (f *Runtime) SetContainerEvents(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events.off = !on
}

// EndContainerEvents ends every open container event stream: its
// WatchContainerEvents returns err, or nil (the stream's end) when err is
// nil, as a runtime that restarts ends its streams.
func (f *Runtime) EndContainerEvents(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.events.subs {
		f.endSub(s, err)
	}
}

// ContainerEventStreams returns how many container event streams are open,
// so a test can wait for its watcher before it acts.
func (f *Runtime) ContainerEventStreams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events.subs)
}

func (f *Runtime) endSub(s *eventSub, err error) {
	if s.ended {
		return
	}
	s.ended, s.end = true, err
	delete(f.events.subs, s)
	s.notify()
}

// WatchContainerEvents streams the fake's container events to fn, one at a
// time on the caller's goroutine, until ctx ends (it returns ctx's error),
// EndContainerEvents ends the stream, or the reader falls MaxPendingEvents
// behind. Events are what containerd 2 sends: CONTAINER_CREATED, _STARTED,
// _STOPPED and _DELETED for containers and, with the sandbox's ID as the
// container ID, for sandboxes (created and started by RunPodSandbox,
// stopped by StopPodSandbox, deleted by RemovePodSandbox), each with the
// sandbox's status and the statuses of its containers at that moment (none
// for a deleted sandbox). While events are off (SetContainerEvents) it
// answers Unimplemented. A Hooks.WatchContainerEvents hook that returns an
// error makes the call fail at once with it.
func (f *Runtime) WatchContainerEvents(ctx context.Context, fn func(*runtimeapi.ContainerEventResponse)) (err error) {
	defer f.wrap("GetContainerEvents", &err)
	if hook := f.enter("WatchContainerEvents", "", nil).WatchContainerEvents; hook != nil {
		if err := hook(ctx, fn); err != nil {
			return err
		}
	}
	f.mu.Lock()
	if f.events.off {
		f.mu.Unlock()
		return status.Error(codes.Unimplemented, "unknown method GetContainerEvents for service runtime.v1.RuntimeService")
	}
	s := &eventSub{wake: make(chan struct{}, 1)}
	if f.events.subs == nil {
		f.events.subs = map[*eventSub]struct{}{}
	}
	f.events.subs[s] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.events.subs, s)
		f.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		}
		f.mu.Lock()
		q, ended, end := s.queue, s.ended, s.end
		s.queue = nil
		f.mu.Unlock()
		for _, ev := range q {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fn(ev)
		}
		if ended {
			return end
		}
	}
}

// emit queues an event about id (a container, or a sandbox when id is
// sandboxID) for every open stream. Called with f.mu held, after the change.
func (f *Runtime) emit(typ runtimeapi.ContainerEventType, id, sandboxID string) {
	if len(f.events.subs) == 0 {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: typ, CreatedAt: f.now()}
	if s, ok := f.sandboxes[sandboxID]; ok {
		ev.PodSandboxStatus = proto.Clone(s.status).(*runtimeapi.PodSandboxStatus)
		for _, c := range f.sortedContainers() {
			if c.sandboxID == sandboxID {
				ev.ContainersStatuses = append(ev.ContainersStatuses, proto.Clone(c.status).(*runtimeapi.ContainerStatus))
			}
		}
	}
	for s := range f.events.subs {
		if len(s.queue) >= MaxPendingEvents {
			f.endSub(s, status.Errorf(codes.ResourceExhausted, "container event stream is %d events behind", len(s.queue)))
			continue
		}
		s.queue = append(s.queue, ev)
		s.notify()
	}
}

// GetContainerEvents serves the CRI call GetContainerEvents when the
// runtime is a runtime.ContainerEventWatcher (the fake is), else answers
// Unimplemented.
func (s *Server) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	w, ok := s.rt.(runtime.ContainerEventWatcher)
	if !ok {
		return s.UnimplementedRuntimeServiceServer.GetContainerEvents(req, stream)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	var sendErr error
	err := w.WatchContainerEvents(ctx, func(ev *runtimeapi.ContainerEventResponse) {
		if sendErr != nil {
			return
		}
		if sendErr = stream.Send(ev); sendErr != nil {
			cancel()
		}
	})
	switch {
	case sendErr != nil:
		return sendErr
	case err != nil && stream.Context().Err() != nil:
		return status.FromContextError(stream.Context().Err()).Err()
	}
	return toStatus(err)
}
