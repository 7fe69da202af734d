package runtimetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

type event struct {
	id      string
	typ     runtimeapi.ContainerEventType
	sandbox string // the status's ID, "" without one
	n       int    // container statuses
}

// watch opens a stream on f and returns its events so far and its end.
func watch(t *testing.T, f *runtimetest.Runtime) (events func() []event, end func() error) {
	t.Helper()
	ch := make(chan event, 100)
	done := make(chan error, 1)
	go func() {
		done <- f.WatchContainerEvents(context.Background(), func(ev *runtimeapi.ContainerEventResponse) {
			ch <- event{ev.ContainerId, ev.ContainerEventType, ev.PodSandboxStatus.GetId(), len(ev.ContainersStatuses)}
		})
	}()
	testenv.Eventually(t, 5*time.Second, time.Millisecond, "stream open", func() bool { return f.ContainerEventStreams() == 1 })
	var got []event
	events = func() []event {
		for {
			select {
			case ev := <-ch:
				got = append(got, ev)
			default:
				return got
			}
		}
	}
	return events, func() error { return <-done }
}

func TestContainerEvents(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	events, end := watch(t, f)
	sb, _ := f.RunPodSandbox(ctx, sandboxConfig("p"), "")
	a, _ := f.CreateContainer(ctx, sb, containerConfig("a"), nil)
	b, _ := f.CreateContainer(ctx, sb, containerConfig("b"), nil)
	_ = f.StartContainer(ctx, a)
	_ = f.Exit(a, 1)
	_ = f.StartContainer(ctx, b)
	_ = f.StopPodSandbox(ctx, sb)
	_ = f.RemovePodSandbox(ctx, sb)
	want := []event{
		{sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb, 0},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb, 0},
		{a, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb, 1},
		{b, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb, 2},
		{a, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb, 2},
		{a, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb, 2},
		{b, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb, 2},
		{b, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb, 2},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb, 2},
		{a, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb, 1},
		{b, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb, 0},
		{sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, "", 0},
	}
	var got []event
	testenv.Eventually(t, 5*time.Second, time.Millisecond, "12 events", func() bool {
		got = events()
		return len(got) >= len(want)
	})
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	f.EndContainerEvents(nil)
	if err := end(); err != nil {
		t.Errorf("stream ended with %v, want nil", err)
	}
}

func TestContainerEventsOffAndInjected(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	f.SetContainerEvents(false)
	if err := f.WatchContainerEvents(ctx, nil); !runtime.IsUnimplemented(err) {
		t.Errorf("events off: %v, want Unimplemented", err)
	}
	f.SetContainerEvents(true)
	next := runtimetest.Errors(status.Error(codes.Unavailable, "down"))
	f.SetHooks(runtimetest.Hooks{
		WatchContainerEvents: func(context.Context, func(*runtimeapi.ContainerEventResponse)) error { return next() },
	})
	if err := f.WatchContainerEvents(ctx, nil); !runtime.IsUnavailable(err) {
		t.Errorf("injected: %v, want Unavailable", err)
	}
	_, end := watch(t, f)
	f.EndContainerEvents(status.Error(codes.Unavailable, "restarted"))
	if err := end(); !runtime.IsUnavailable(err) {
		t.Errorf("ended: %v, want Unavailable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.WatchContainerEvents(cctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if n := f.ContainerEventStreams(); n != 0 {
		t.Errorf("%d streams open", n)
	}
}
