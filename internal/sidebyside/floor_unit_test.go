package sidebyside

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A pod's Started runs with its slot given back: with one slot, the second
// pod starts while the first waits in Started, and the first's time runs
// until its Started returns.
func TestStartPodsStartedOutsideTheSlot(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	pod := func(name string) RuntimePod {
		return RuntimePod{
			Sandbox: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}},
			Containers: []*runtimeapi.ContainerConfig{{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
				Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}},
		}
	}
	second := make(chan struct{})
	var firstIDs []string
	first := pod("first")
	first.Started = func(ctx context.Context, ids []string) error {
		firstIDs = ids
		select {
		case <-second:
			return nil
		case <-time.After(30 * time.Second):
			t.Error("the second pod did not start while the first waited in Started")
			return nil
		}
	}
	next := pod("second")
	next.Started = func(context.Context, []string) error { close(second); return nil }
	ids, took, err := StartPods(context.Background(), rt, []RuntimePod{first, next}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] == "" || ids[1] == "" || len(firstIDs) != 1 {
		t.Fatalf("sandboxes %q, the first's containers %q; want two sandboxes, one container", ids, firstIDs)
	}
	if took[0] < took[1] {
		t.Errorf("the first pod took %v, the second %v: the first's time should run until its Started returned", took[0], took[1])
	}
	cs, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil || len(cs) != 2 {
		t.Errorf("running containers %d (%v), want 2", len(cs), err)
	}
}

// A stop that runs out of time is asked again; one that fails otherwise is
// not.
func TestRemovePodsRetriesAStopOutOfTime(t *testing.T) {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{})
	var ids []string
	for _, name := range []string{"a", "b"} {
		id, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	rt.SetHooks(runtimetest.Hooks{StopPodSandbox: func(_ context.Context, id string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[id]++
		switch {
		case id == ids[0] && calls[id] < 3:
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		case id == ids[1] && calls[id] < 3:
			return status.Error(codes.Unavailable, "gone")
		}
		return nil
	}})
	_, _, err := RemovePods(ctx, rt, ids, 2)
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("RemovePods: %v; want the Unavailable stop's error", err)
	}
	if calls[ids[0]] != 3 || calls[ids[1]] != 1 {
		t.Errorf("stops asked %d and %d times; want 3 (twice out of time) and 1", calls[ids[0]], calls[ids[1]])
	}
}
