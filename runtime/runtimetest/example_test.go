package runtimetest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A container that crashes, an exec probe that fails, a runtime error on the
// next start, and the calls the code under test made.
func Example() {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake := runtimetest.New(runtimetest.Options{Clock: clock})

	sb, _ := fake.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"},
	}, "")
	id, _ := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage},
	}, nil)
	_ = fake.StartContainer(ctx, id)

	// An exec probe that fails with exit code 1.
	probe := []string{"cat", "/tmp/healthy"}
	fake.ScriptExec(id, probe, runtimetest.ExecScript{Stderr: "No such file or directory\n", ExitCode: 1})
	res, _ := fake.ExecSync(ctx, id, probe, time.Second)
	fmt.Printf("probe exit %d: %s", res.ExitCode, res.Stderr)

	// One that hangs.
	fake.ScriptExec(id, []string{"hang"}, runtimetest.ExecScript{Timeout: true})
	_, err := fake.ExecSync(ctx, id, []string{"hang"}, time.Second)
	fmt.Println("timeout:", errors.Is(err, runtime.ErrExecTimeout))

	// The container crashes 5s later.
	clock.Step(5 * time.Second)
	_ = fake.Exit(id, 2)
	st, _ := fake.ContainerStatus(ctx, id, false)
	fmt.Println(st.Status.State, st.Status.ExitCode, st.Status.Reason,
		time.Duration(st.Status.FinishedAt-st.Status.StartedAt))

	// The runtime fails the next CreateContainer.
	next := runtimetest.Errors(errors.New("disk full"))
	fake.SetHooks(runtimetest.Hooks{
		CreateContainer: func(context.Context, string, *runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig) error {
			return next()
		},
	})
	_, err = fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1},
		Image:    &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage},
	}, nil)
	fmt.Println("create:", err)

	// The network plugin is not ready.
	fake.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")

	for _, c := range fake.Calls() {
		fmt.Println(c.Method, c.Cmd)
	}
	// Output:
	// probe exit 1: No such file or directory
	// timeout: true
	// CONTAINER_EXITED 2 Error 5s
	// create: cri fake://runtimetest: CreateContainer: disk full
	// RunPodSandbox []
	// CreateContainer []
	// StartContainer []
	// ExecSync [cat /tmp/healthy]
	// ExecSync [hang]
	// ContainerStatus []
	// CreateContainer []
}

// Streaming sessions handed out on a test's own server: Exec returns a URL
// there, and the server learns from StreamRequest what to serve.
func ExampleRuntime_SetStreamURL() {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	f.SetStreamURL("http://127.0.0.1:10010") // an httptest.Server's URL in a test
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}}
	sb, _ := f.RunPodSandbox(ctx, sbCfg, "")
	id, _ := f.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}, sbCfg)
	_ = f.StartContainer(ctx, id)

	url, err := f.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"ls", "/"}, Stdout: true})
	fmt.Println(url, err)
	req, _ := f.StreamRequest(url)
	fmt.Println(req.(*runtimeapi.ExecRequest).Cmd)
	_, err = f.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"ls"}})
	fmt.Println(runtime.IsNotFound(err), err)
	// Output:
	// http://127.0.0.1:10010/exec/exec1 <nil>
	// [ls /]
	// false cri fake://runtimetest: Exec: InvalidArgument: one of stdin, stdout, or stderr must be set
}
