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

// A pod's Started runs with its slot given back: with one slot, both pods
// are in their Started at once (whichever started first), and each pod's
// time runs until its Started returns.
func TestStartPodsStartedOutsideTheSlot(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	var mu sync.Mutex
	var firstRun time.Time // the first RunPodSandbox: StartPods' clock started before it
	rt.SetHooks(runtimetest.Hooks{RunPodSandbox: func(context.Context, *runtimeapi.PodSandboxConfig, string) error {
		mu.Lock()
		defer mu.Unlock()
		if firstRun.IsZero() {
			firstRun = time.Now()
		}
		return nil
	}})
	var inStarted sync.WaitGroup
	inStarted.Add(2)
	both := make(chan struct{})
	go func() { inStarted.Wait(); close(both) }()
	returned := make([]time.Time, 2)
	containers := make([]int, 2)
	pods := make([]RuntimePod, 2)
	for i, name := range []string{"first", "second"} {
		pods[i] = RuntimePod{
			Sandbox: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}},
			Containers: []*runtimeapi.ContainerConfig{{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
				Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}},
			Started: func(_ context.Context, ids []string) error {
				containers[i] = len(ids)
				inStarted.Done()
				select {
				case <-both:
				case <-time.After(30 * time.Second):
					t.Errorf("pod %s: the other pod did not start while this one waited in Started", name)
				}
				returned[i] = time.Now()
				return nil
			},
		}
	}
	ids, took, err := StartPods(context.Background(), rt, pods, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] == "" || ids[1] == "" || containers[0] != 1 || containers[1] != 1 {
		t.Fatalf("sandboxes %q, containers given to Started %v; want two sandboxes, one container each", ids, containers)
	}
	for i := range pods {
		if atLeast := returned[i].Sub(firstRun); took[i] < atLeast {
			t.Errorf("pod %d took %v; want at least %v, until its Started returned", i, took[i], atLeast)
		}
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
