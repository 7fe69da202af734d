package containerdtest

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/testenv"
)

// runningBusybox starts runBusybox's pod, removes it when the test ends,
// and waits until its container runs; state reads the container's state.
func runningBusybox(t *testing.T, ctx context.Context, c *Containerd, pod string) (sandboxID string, state func() runtimeapi.ContainerState) {
	t.Helper()
	rt := c.RuntimeClient()
	sandboxID, containerID, _ := runBusybox(t, ctx, c, pod)
	t.Cleanup(func() {
		_, _ = rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxID})
		_, _ = rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxID})
	})
	state = func() runtimeapi.ContainerState {
		st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
		if err != nil {
			t.Fatal(err)
		}
		return st.GetStatus().GetState()
	}
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "the container running", func() bool {
		return state() == runtimeapi.ContainerState_CONTAINER_RUNNING
	})
	return sandboxID, state
}

// TestKillBelow kills a running container through its pod's cgroup: the
// runtime then reports it exited, and the pod is removed. A cgroup
// directory that does not exist has nothing to kill.
func TestKillBelow(t *testing.T) {
	c := Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := c.RuntimeClient()
	sandboxID, state := runningBusybox(t, ctx, c, "killbelow")
	if err := c.KillBelow(ctx, "no-such-pod"); err != nil {
		t.Errorf("KillBelow of a cgroup that does not exist: %v", err)
	}
	if state() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatal("KillBelow of another cgroup stopped the container")
	}
	if err := c.KillBelow(ctx, "poduid-killbelow"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "the container exited", func() bool {
		return state() == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxID}); err != nil {
		t.Errorf("removing the pod after its container was killed: %v", err)
	}
}

// TestKillShims kills the shim under a running container: containerd
// stays up, the container is no longer running, and its pod is removed.
func TestKillShims(t *testing.T) {
	c := Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := c.RuntimeClient()
	sandboxID, state := runningBusybox(t, ctx, c, "killshims")
	before := c.Pid()
	if err := c.KillShims(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Pid() != before || !c.running() {
		t.Fatal("KillShims stopped containerd")
	}
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "the container not running", func() bool {
		return state() != runtimeapi.ContainerState_CONTAINER_RUNNING
	})
	testenv.EventuallyErr(t, 30*time.Second, 50*time.Millisecond, "the pod removed", func() (bool, error) {
		_, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxID})
		return err == nil, err
	})
}
