package containerdtest

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/testenv"
)

// TestKillRestart stops the shared instance's containerd under a running
// container, with SIGTERM and then with SIGKILL: the container's process
// lives on, the CRI is unreachable while containerd is down, and after
// Restart the same container is listed running again; Restart of a running
// containerd and Kill of a dead one are errors.
func TestKillRestart(t *testing.T) {
	c := Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := c.RuntimeClient()
	sandboxID, containerID, _ := runBusybox(t, ctx, c, "restart")
	defer func() {
		_, _ = rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxID})
		_, _ = rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxID})
	}()
	var pid int
	testenv.EventuallyErr(t, 30*time.Second, 50*time.Millisecond, "the container running", func() (bool, error) {
		st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: true})
		if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			return false, err
		}
		pid = ContainerPid(st.Info["info"])
		return pid != 0, nil
	})
	if err := c.Restart(ctx); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("Restart of a running containerd = %v; want an error saying it still runs", err)
	}

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		before := c.Pid()
		if err := c.Kill(ctx, sig); err != nil {
			t.Fatal(err)
		}
		if err := c.Kill(ctx, sig); err == nil || !strings.Contains(err.Error(), "already exited") {
			t.Errorf("second Kill = %v; want an error saying containerd has exited", err)
		}
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := rt.Version(callCtx, &runtimeapi.VersionRequest{})
		callCancel()
		if err == nil {
			t.Fatalf("%v: the CRI answers while containerd is down", sig)
		}
		if !alive(pid) {
			t.Fatalf("%v: the container's process %d died with containerd", sig, pid)
		}
		begin := time.Now()
		if err := c.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: restarted in %v", sig, time.Since(begin).Round(time.Millisecond))
		if c.Pid() == before || c.Pid() == 0 {
			t.Errorf("%v: pid %d after Restart, %d before", sig, c.Pid(), before)
		}
		list, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Containers) != 1 || list.Containers[0].Id != containerID || list.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("%v: containers after Restart %v; want %s running", sig, list.Containers, containerID)
		}
	}
}
