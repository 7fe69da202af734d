package cri

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
)

// taskFirst has containerd start a container's task through its own API
// before the CRI StartContainer, which then fails (the task exists). That
// leaves the container as containerd 2 leaves one whose StartContainer was
// cut short (its caller went away) after the task was created and before
// the task's pid was read: exited with StartError, never started, its task
// kept, and RemoveContainer refused with FailedPrecondition ("cannot
// delete running task") for as long as the task exists. No CRI call
// removes that task: StopContainer does nothing to an exited container,
// and containerd's CRI deletes only tasks it started.
type taskFirst struct {
	runtime.Runtime
	c *containerdtest.Containerd
}

func (r taskFirst) StartContainer(ctx context.Context, id string) error {
	if _, err := r.c.Ctr(ctx, "tasks", "start", "--detach", "--null-io", id); err != nil {
		return err
	}
	return r.Runtime.StartContainer(ctx, id)
}

// A pod whose container an earlier agent's cut-short start left behind,
// kept by containerd 2, runs under the next agent: the replacement starts
// as a restart (restartCount 1) beside the kept container.
func TestE2ECutShortStartKeptByContainerd2(t *testing.T) {
	c := containerdtest.Need2(t, ctrd2)
	t.Cleanup(leakcheck.Check(t))
	ctx := context.Background()
	podRoot := t.TempDir()
	pod := e2ePod(c, "kept", corev1.RestartPolicyAlways, "sh", "-c", sleeper)

	// The earlier agent: one sync, whose start is cut short.
	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first, err := New(Options{Runtime: taskFirst{rt, c}, PodLogRoot: c.PodLogRoot, PodRoot: podRoot, CgroupRoot: c.CgroupRoot, CgroupsPerQOS: true,
		ResolvConf: "-", HostIPs: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, syncErr := first.SyncPod(ctx, pod, nil)
	cs, err := rt.ListContainers(ctx, nil)
	_ = rt.Close()
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers after the first sync (%v): %v, %v; want one", syncErr, cs, err)
	}
	kept := cs[0].Id
	t.Cleanup(func() { _, _ = c.Ctr(context.Background(), "tasks", "delete", "--force", kept) })
	st, err := c.RuntimeClient().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: kept})
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Status.Reason != "StartError" || st.Status.StartedAt != 0 {
		t.Fatalf("the cut-short container: %v, %v; want exited with StartError, never started", st.GetStatus(), err)
	}
	if tasks, err := c.Ctr(ctx, "tasks", "list", "--quiet"); err != nil || !strings.Contains(string(tasks), kept) {
		t.Fatalf("containerd's tasks (%v): %s; want the cut-short container's", err, tasks)
	}

	// The next agent.
	e := startE2E(t, c, podRoot)
	t.Cleanup(e.stop)
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "Running and Ready", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodRunning && cond(s, corev1.PodReady) == "True/"
	})
	if got := s.ContainerStatuses[0]; got.RestartCount != 1 || got.State.Running == nil || got.ContainerID == "containerd://"+kept {
		t.Errorf("container status %+v; want the replacement running at restartCount 1", got)
	}
	if st, err := e.rt.ContainerStatus(ctx, kept, false); err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("the cut-short container: %v, %v; want it still there, exited (containerd 2 refuses to remove it)", st.GetStatus().GetState(), err)
	}

	// Only containerd's own API removes the task; then the pod goes as any.
	if _, err := c.Ctr(ctx, "tasks", "delete", "--force", kept); err != nil {
		t.Fatal(err)
	}
	e.remove(pod)
}
