package runtimetest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/runtime/runtimetest/contract"
)

func TestContractFake(t *testing.T) {
	contract.Run(t, func(t *testing.T) contract.Target {
		f := runtimetest.New(runtimetest.Options{})
		return contract.Target{
			Runtime:      f,
			Fake:         f,
			PauseImage:   runtimetest.PauseImage,
			BusyboxImage: runtimetest.BusyboxImage,
		}
	})
}

func sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Labels:   map[string]string{"pod": name},
	}
}

func containerConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage},
		Labels:   map[string]string{"container": name},
	}
}

func TestTimestampsFromClock(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	f := runtimetest.New(runtimetest.Options{Clock: clk})

	_, id := createdContainer(t, f)
	clk.Step(time.Second)
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := f.Exit(id, 2); err != nil {
		t.Fatal(err)
	}
	resp, err := f.ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Status
	if st.CreatedAt != t0.UnixNano() || st.StartedAt != t0.Add(time.Second).UnixNano() || st.FinishedAt != t0.Add(2*time.Second).UnixNano() {
		t.Errorf("created %d started %d finished %d, want the clock's times", st.CreatedAt, st.StartedAt, st.FinishedAt)
	}
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 2 || st.Reason != "Error" {
		t.Errorf("status %v %d %q, want EXITED 2 Error", st.State, st.ExitCode, st.Reason)
	}
	if err := f.Exit(id, 0); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Exit of an exited container: %v, want FailedPrecondition", err)
	}
	if err := f.Exit("nope", 0); !runtime.IsNotFound(err) {
		t.Errorf("Exit of a missing container: %v, want NotFound", err)
	}
}

func TestHooksAndCalls(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	sb, id := createdContainer(t, f)
	boom := errors.New("boom")
	next := runtimetest.Errors(boom, status.Error(codes.Unavailable, "down"))
	f.SetHooks(runtimetest.Hooks{StartContainer: func(context.Context, string) error { return next() }})
	if err := f.StartContainer(ctx, id); !errors.Is(err, boom) {
		t.Fatalf("first StartContainer: %v, want boom", err)
	}
	if err := f.StartContainer(ctx, id); !runtime.IsUnavailable(err) {
		t.Fatalf("second StartContainer: %v, want Unavailable", err)
	}
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatalf("third StartContainer: %v", err)
	}
	if _, err := f.ExecSync(ctx, id, []string{"ls", "/"}, time.Second); err != nil {
		t.Fatal(err)
	}
	want := []runtimetest.Call{
		{Method: "RunPodSandbox"},
		{Method: "CreateContainer", ID: sb},
		{Method: "StartContainer", ID: id},
		{Method: "StartContainer", ID: id},
		{Method: "StartContainer", ID: id},
		{Method: "ExecSync", ID: id, Cmd: []string{"ls", "/"}},
	}
	got := f.Calls()
	if !slices.EqualFunc(got, want, func(a, b runtimetest.Call) bool {
		return a.Method == b.Method && a.ID == b.ID && slices.Equal(a.Cmd, b.Cmd)
	}) {
		t.Errorf("Calls() = %+v\nwant %+v", got, want)
	}
	if n, m := f.CallCount("StartContainer"), f.CallCount("StopContainer"); n != 3 || m != 0 {
		t.Errorf("CallCount: StartContainer %d, StopContainer %d; want 3 and 0", n, m)
	}
	f.ResetCalls()
	if n := len(f.Calls()); n != 0 {
		t.Errorf("after ResetCalls: %d calls", n)
	}
}

func TestScriptExec(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	sb, _ := f.RunPodSandbox(ctx, sandboxConfig("p"), "")
	a, _ := f.CreateContainer(ctx, sb, containerConfig("a"), nil)
	b, _ := f.CreateContainer(ctx, sb, containerConfig("b"), nil)
	for _, id := range []string{a, b} {
		if err := f.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	probe := []string{"cat", "/tmp/healthy"}
	f.ScriptExec("", nil, runtimetest.ExecScript{Stdout: "any"})
	f.ScriptExec("", probe, runtimetest.ExecScript{Stdout: "probe"})
	f.ScriptExec(a, nil, runtimetest.ExecScript{Stdout: "a-any"})
	f.ScriptExec(a, probe, runtimetest.ExecScript{ExitCode: 1, Stderr: "no such file"})
	f.ScriptExec(b, []string{"hang"}, runtimetest.ExecScript{Timeout: true})
	f.ScriptExec(b, []string{"fail"}, runtimetest.ExecScript{Err: status.Error(codes.Internal, "broken")})

	check := func(id string, cmd []string, stdout, stderr string, code int32) {
		t.Helper()
		res, err := f.ExecSync(ctx, id, cmd, time.Second)
		if err != nil {
			t.Fatalf("ExecSync(%v): %v", cmd, err)
		}
		if string(res.Stdout) != stdout || string(res.Stderr) != stderr || res.ExitCode != code {
			t.Errorf("ExecSync(%v) = %q %q %d, want %q %q %d", cmd, res.Stdout, res.Stderr, res.ExitCode, stdout, stderr, code)
		}
	}
	check(a, probe, "", "no such file", 1)
	check(a, []string{"other"}, "a-any", "", 0)
	check(b, probe, "probe", "", 0)
	check(b, []string{"other"}, "any", "", 0)

	_, err := f.ExecSync(ctx, b, []string{"hang"}, time.Second)
	if !errors.Is(err, runtime.ErrExecTimeout) || status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("scripted timeout: %v (code %v), want ErrExecTimeout and DeadlineExceeded", err, status.Code(err))
	}
	if _, err := f.ExecSync(ctx, b, []string{"fail"}, time.Second); status.Code(err) != codes.Internal {
		t.Errorf("scripted error: %v, want Internal", err)
	}
	// Replacing a script.
	f.ScriptExec(a, probe, runtimetest.ExecScript{Stdout: "ok"})
	check(a, probe, "ok", "", 0)

	if err := f.StopContainer(ctx, a, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ExecSync(ctx, a, probe, time.Second); err == nil || err.Error() != "cri fake://runtimetest: ExecSync: Unknown: container is in CONTAINER_EXITED state" {
		t.Errorf("ExecSync in an exited container: %v", err)
	}
}

// The fake's errors, its own and injected ones, read like runtime/remote's Client's
// and keep their gRPC codes.
func TestErrorsReadLikeClient(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	_, err := f.ContainerStatus(ctx, "missing", false)
	if want := `cri fake://runtimetest: ContainerStatus: NotFound: an error occurred when try to find container "missing": not found`; err == nil || err.Error() != want {
		t.Errorf("ContainerStatus(missing) = %v, want %s", err, want)
	}
	if !runtime.IsNotFound(err) {
		t.Errorf("ContainerStatus(missing): code %v, want NotFound", status.Code(err))
	}
	var re *runtime.Error
	if !errors.As(err, &re) || re.Method != "ContainerStatus" || re.Endpoint != runtimetest.Endpoint {
		t.Errorf("ContainerStatus(missing) = %#v, want a *runtime.Error naming the call", err)
	}
	f.SetHooks(runtimetest.Hooks{
		StartContainer: func(context.Context, string) error {
			return status.Error(codes.Unavailable, "connection refused")
		},
		ListImages: func(context.Context, *runtimeapi.ImageFilter) error { return errors.New("disk full") },
	})
	err = f.StartContainer(ctx, "x")
	if want := "cri fake://runtimetest: StartContainer: Unavailable: connection refused"; err == nil || err.Error() != want || !runtime.IsUnavailable(err) {
		t.Errorf("injected error = %v (code %v), want %s with code Unavailable", err, status.Code(err), want)
	}
	_, err = f.ListImages(ctx, nil)
	if want := "cri fake://runtimetest: ListImages: disk full"; err == nil || err.Error() != want {
		t.Errorf("injected plain error = %v, want %s", err, want)
	}
}

func TestNoCallLog(t *testing.T) {
	f := runtimetest.New(runtimetest.Options{NoCallLog: true})
	for range 3 {
		if _, err := f.Version(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if c := f.Calls(); len(c) != 0 {
		t.Errorf("Calls() = %v with NoCallLog, want none", c)
	}
	f.SetHooks(runtimetest.Hooks{Version: func(context.Context) error { return errors.New("still injected") }})
	if _, err := f.Version(context.Background()); err == nil {
		t.Error("Hooks have no effect with NoCallLog")
	}
}

func TestConditionsAndImages(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{RuntimeName: "myrt", RuntimeVersion: "9.9"})
	v, err := f.Version(ctx)
	if err != nil || v.RuntimeName != "myrt" || v.RuntimeVersion != "9.9" || v.RuntimeApiVersion != "v1" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	f.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	resp, err := f.Status(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	conds := map[string]*runtimeapi.RuntimeCondition{}
	for _, c := range resp.Status.Conditions {
		conds[c.Type] = c
	}
	if !conds[runtimeapi.RuntimeReady].GetStatus() || conds[runtimeapi.NetworkReady].GetStatus() || conds[runtimeapi.NetworkReady].GetReason() != "NetworkPluginNotReady" {
		t.Errorf("conditions = %v", resp.Status.Conditions)
	}

	id := f.AddImage("example.com/big:1", 1<<30)
	imgs, err := f.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	var total uint64
	for _, img := range imgs {
		tags = append(tags, img.RepoTags...)
		total += img.Size
	}
	wantTags := []string{runtimetest.BusyboxImage, "example.com/big:1", runtimetest.PauseImage}
	if !slices.Equal(tags, wantTags) {
		t.Errorf("ListImages tags = %v, want %v", tags, wantTags)
	}
	st, err := f.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: id}, false)
	if err != nil || st.Image.GetSize() != 1<<30 {
		t.Errorf("ImageStatus by ID = %v, %v", st, err)
	}
	fs, err := f.ImageFsInfo(ctx)
	if err != nil || fs.ImageFilesystems[0].UsedBytes.Value != total {
		t.Errorf("ImageFsInfo = %v, %v; want used %d", fs, err, total)
	}
	ref, err := f.PullImage(ctx, &runtimeapi.ImageSpec{Image: "example.com/new:2"}, nil, nil)
	if err != nil || ref == "" {
		t.Fatalf("PullImage = %q, %v", ref, err)
	}
	if err := f.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "example.com/new:2"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); st.Image != nil {
		t.Errorf("image still there after RemoveImage")
	}

	none := runtimetest.New(runtimetest.Options{Images: map[string]uint64{}})
	if imgs, _ := none.ListImages(ctx, nil); len(imgs) != 0 {
		t.Errorf("Images: {} gave %d images", len(imgs))
	}
}

func TestCreateErrors(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	if _, err := f.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, ""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("sandbox without metadata: %v", err)
	}
	sb, _ := f.RunPodSandbox(ctx, sandboxConfig("p"), "")
	if _, err := f.RunPodSandbox(ctx, sandboxConfig("p"), ""); status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate sandbox: %v", err)
	}
	if _, err := f.CreateContainer(ctx, sb, containerConfig("c"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateContainer(ctx, sb, containerConfig("c"), nil); status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate container: %v", err)
	}
	if _, err := f.CreateContainer(ctx, "missing", containerConfig("x"), nil); !runtime.IsNotFound(err) {
		t.Errorf("container in a missing sandbox: %v", err)
	}
	_ = f.StopPodSandbox(ctx, sb)
	if _, err := f.CreateContainer(ctx, sb, containerConfig("y"), nil); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("container in a stopped sandbox: %v", err)
	}
	// Prefix lookup, as containerd resolves truncated IDs.
	if _, err := f.PodSandboxStatus(ctx, sb[:12], false); err != nil {
		t.Errorf("PodSandboxStatus by ID prefix: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				name := fmt.Sprintf("p%d-%d", i, j)
				sb, err := f.RunPodSandbox(ctx, sandboxConfig(name), "")
				if err != nil {
					t.Error(err)
					return
				}
				id, err := f.CreateContainer(ctx, sb, containerConfig("c"), nil)
				if err != nil {
					t.Error(err)
					return
				}
				_ = f.StartContainer(ctx, id)
				_, _ = f.ExecSync(ctx, id, []string{"true"}, time.Second)
				_, _ = f.ListContainers(ctx, nil)
				_, _ = f.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"pod": name}})
				f.SetHooks(runtimetest.Hooks{Status: func(context.Context, bool) error { return errors.New("x") }})
				_, _ = f.Status(ctx, false)
				_ = f.Calls()
				_ = f.RemovePodSandbox(ctx, sb)
			}
		}()
	}
	wg.Wait()
	if cs, _ := f.ListContainers(ctx, nil); len(cs) != 0 {
		t.Errorf("%d containers left", len(cs))
	}
}
