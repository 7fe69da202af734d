package remote_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/runtime/runtimetest/contract"

	"github.com/nodekit/nodekit/internal/testenv"
)

// socketPath returns a fresh unix socket path, short enough for sun_path.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

// serve serves register's services on path until the returned stop is
// called (or the test ends).
func serve(t *testing.T, path string, register func(*grpc.Server)) (stop func()) {
	t.Helper()
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	register(g)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(l) }()
	var once sync.Once
	stop = func() { once.Do(func() { g.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// fakeServer serves a new fake runtime and returns it with its endpoint.
func fakeServer(t *testing.T) (*runtimetest.Runtime, string) {
	t.Helper()
	f := runtimetest.New(runtimetest.Options{})
	path := socketPath(t)
	serve(t, path, runtimetest.NewServer(f).Register)
	return f, "unix://" + path
}

func dial(t *testing.T, opts remote.Options) *remote.Client {
	t.Helper()
	c, err := remote.Dial(context.Background(), opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// contractOverFake runs the contract suite on the Runtime that connect
// makes to a fake served at endpoint ep.
func contractOverFake(t *testing.T, connect func(t *testing.T, ep string) runtime.Runtime) {
	contract.Run(t, func(t *testing.T) contract.Target {
		f, ep := fakeServer(t)
		return contract.Target{
			Runtime:      connect(t, ep),
			Fake:         f,
			PauseImage:   runtimetest.PauseImage,
			BusyboxImage: runtimetest.BusyboxImage,
		}
	})
}

func TestContractClientOverFake(t *testing.T) {
	contractOverFake(t, func(t *testing.T, ep string) runtime.Runtime { return dial(t, remote.Options{Endpoint: ep}) })
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  remote.Options
		field string
	}{
		{"tcp endpoint", remote.Options{Endpoint: "tcp://127.0.0.1:1"}, "Options.Endpoint"},
		{"bare path", remote.Options{Endpoint: "/run/containerd/containerd.sock"}, "Options.Endpoint"},
		{"empty unix path", remote.Options{Endpoint: "unix://"}, "Options.Endpoint"},
		{"nanosecond request timeout", remote.Options{RequestTimeout: 10}, "Options.RequestTimeout"},
		{"negative request timeout", remote.Options{RequestTimeout: -time.Second}, "Options.RequestTimeout"},
		{"huge request timeout", remote.Options{RequestTimeout: 48 * time.Hour}, "Options.RequestTimeout"},
		{"nanosecond connection timeout", remote.Options{ConnectionTimeout: 5}, "Options.ConnectionTimeout"},
		{"tiny message size", remote.Options{MaxMessageSize: 100}, "Options.MaxMessageSize"},
		{"negative message size", remote.Options{MaxMessageSize: -1}, "Options.MaxMessageSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := remote.New(tc.opts)
			if err == nil {
				c.Close()
				t.Fatal("New: nil error")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("New: %v, want it to name %s", err, tc.field)
			}
		})
	}
}

func TestDialRuntimeDown(t *testing.T) {
	defer leakcheck.Check(t)()
	ep := "unix://" + socketPath(t)
	_, err := remote.Dial(context.Background(), remote.Options{Endpoint: ep, ConnectionTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("Dial to nothing: nil error")
	}
	if !runtime.IsUnavailable(err) {
		t.Errorf("Dial to nothing: %v (code %v), want Unavailable", err, status.Code(err))
	}
	if want := "cri " + ep + ": Version: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want prefix %q", err, want)
	}
}

func TestDialNotCRIv1(t *testing.T) {
	defer leakcheck.Check(t)()
	path := socketPath(t)
	stop := serve(t, path, func(g *grpc.Server) { healthpb.RegisterHealthServer(g, health.NewServer()) })
	defer stop()
	_, err := remote.New(remote.Options{Endpoint: "unix://" + path})
	if err == nil {
		t.Fatal("New: nil error for a server without runtime.v1")
	}
	if !errors.Is(err, remote.ErrNotCRIv1) || !runtime.IsUnimplemented(err) {
		t.Errorf("New: %v, want ErrNotCRIv1 and code Unimplemented", err)
	}
	if !strings.Contains(err.Error(), "does not serve runtime.v1") || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not say the endpoint does not serve runtime.v1", err)
	}
}

// A socket that serves HTTP/1 (a wrong path, some other daemon) is not a
// runtime that is down: Dial says ErrNotCRIv1, not Unavailable.
func TestDialHTTP1NotCRIv1(t *testing.T) {
	defer leakcheck.Check(t)()
	path := socketPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "not a runtime")
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	defer func() { _ = srv.Close(); <-done }()

	_, err = remote.Dial(context.Background(), remote.Options{Endpoint: "unix://" + path, ConnectionTimeout: 10 * time.Second})
	if err == nil {
		t.Fatal("Dial to an HTTP/1 server: nil error")
	}
	if !errors.Is(err, remote.ErrNotCRIv1) {
		t.Errorf("Dial to an HTTP/1 server: %v, want ErrNotCRIv1", err)
	}
	if runtime.IsUnavailable(err) {
		t.Errorf("Dial to an HTTP/1 server: %v has code Unavailable, which says: retry", err)
	}
	if want := "cri unix://" + path + ": Version: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want prefix %q", err, want)
	}
}

func TestErrorsNameEndpointAndCall(t *testing.T) {
	f, ep := fakeServer(t)
	c := dial(t, remote.Options{Endpoint: ep})
	ctx := context.Background()

	fail := runtimetest.Errors(status.Error(codes.Internal, "boom"))
	f.SetHooks(runtimetest.Hooks{ListContainers: func(context.Context, *runtimeapi.ContainerFilter) error { return fail() }})
	_, err := c.ListContainers(ctx, nil)
	if want := "cri " + ep + ": ListContainers: Internal: boom"; err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if status.Code(err) != codes.Internal {
		t.Errorf("status.Code = %v, want Internal", status.Code(err))
	}
	if st, ok := status.FromError(err); !ok || st.Code() != codes.Internal || st.Message() != "boom" {
		t.Errorf("status.FromError = %v, %v", st, ok)
	}
	var e *runtime.Error
	if !errors.As(err, &e) || e.Endpoint != ep || e.Method != "ListContainers" {
		t.Errorf("errors.As: %#v", e)
	}
	// Wrapped once more by a caller, the code is still there.
	if wrapped := errors.Join(errors.New("sync pod"), err); status.Code(wrapped) != codes.Internal {
		t.Errorf("status.Code of a wrapped error = %v", status.Code(wrapped))
	}

	_, err = c.ContainerStatus(ctx, "nope", false)
	if !runtime.IsNotFound(err) {
		t.Errorf("ContainerStatus(missing): %v, want NotFound", err)
	}
	if !strings.HasPrefix(err.Error(), "cri "+ep+": ContainerStatus: NotFound: ") {
		t.Errorf("error %q", err)
	}

	// CRI's idempotent calls: NotFound from the runtime is success.
	fail = runtimetest.Errors(status.Error(codes.NotFound, "container not found"))
	f.SetHooks(runtimetest.Hooks{StopContainer: func(context.Context, string, time.Duration) error { return fail() }})
	if err := c.StopContainer(ctx, "gone", time.Second); err != nil {
		t.Errorf("StopContainer answered NotFound: %v, want nil", err)
	}
	fail = runtimetest.Errors(status.Error(codes.NotFound, "sandbox not found"))
	f.SetHooks(runtimetest.Hooks{StopPodSandbox: func(context.Context, string) error { return fail() }})
	if err := c.StopPodSandbox(ctx, "gone"); err != nil {
		t.Errorf("StopPodSandbox answered NotFound: %v, want nil", err)
	}
	fail = runtimetest.Errors(status.Error(codes.NotFound, "container not found"))
	f.SetHooks(runtimetest.Hooks{StartContainer: func(context.Context, string) error { return fail() }})
	if err := c.StartContainer(ctx, "gone"); !runtime.IsNotFound(err) {
		t.Errorf("StartContainer answered NotFound: %v, want NotFound", err)
	}
}

// recorder records the timeouts the client sends and can block calls.
type recorder struct {
	*runtimetest.Server
	mu         sync.Mutex
	stopSecs   []int64
	execSecs   []int64
	block      chan struct{} // ExecSync and ContainerStatus wait on it (or their context)
	execResult *runtimeapi.ExecSyncResponse
}

func (r *recorder) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	r.stopSecs = append(r.stopSecs, req.Timeout)
	r.mu.Unlock()
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *recorder) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	r.mu.Lock()
	r.execSecs = append(r.execSecs, req.Timeout)
	r.mu.Unlock()
	if r.execResult != nil {
		return r.execResult, nil
	}
	select {
	case <-r.block:
		return nil, status.Error(codes.DeadlineExceeded, "timeout 1s exceeded: context deadline exceeded")
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (r *recorder) ContainerStatus(ctx context.Context, _ *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	select {
	case <-r.block:
		return &runtimeapi.ContainerStatusResponse{}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func recorderServer(t *testing.T, opts remote.Options) (*recorder, *remote.Client) {
	t.Helper()
	r := &recorder{Server: runtimetest.NewServer(runtimetest.New(runtimetest.Options{})), block: make(chan struct{})}
	path := socketPath(t)
	serve(t, path, func(g *grpc.Server) {
		runtimeapi.RegisterRuntimeServiceServer(g, r)
		runtimeapi.RegisterImageServiceServer(g, r)
	})
	opts.Endpoint = "unix://" + path
	return r, dial(t, opts)
}

func TestStopContainerRoundsUp(t *testing.T) {
	r, c := recorderServer(t, remote.Options{})
	ctx := context.Background()
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond, time.Second, 1500 * time.Millisecond, 30 * time.Second} {
		if err := c.StopContainer(ctx, "x", d); err != nil {
			t.Fatal(err)
		}
	}
	want := []int64{0, 0, 1, 1, 2, 30}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stopSecs) != len(want) {
		t.Fatalf("timeouts sent %v, want %v", r.stopSecs, want)
	}
	for i := range want {
		if r.stopSecs[i] != want[i] {
			t.Errorf("timeouts sent %v, want %v", r.stopSecs, want)
			break
		}
	}
}

func TestExecSyncExitCodeIsAResult(t *testing.T) {
	r, c := recorderServer(t, remote.Options{})
	r.execResult = &runtimeapi.ExecSyncResponse{Stdout: []byte("out"), Stderr: []byte("err"), ExitCode: 3}
	res, err := c.ExecSync(context.Background(), "x", []string{"false"}, 500*time.Millisecond)
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if string(res.Stdout) != "out" || string(res.Stderr) != "err" || res.ExitCode != 3 {
		t.Errorf("ExecSync = %+v", res)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.execSecs) != 1 || r.execSecs[0] != 1 {
		t.Errorf("exec timeout sent %v, want [1] (500ms rounded up)", r.execSecs)
	}
}

func TestExecSyncTimeoutFromRuntime(t *testing.T) {
	r, c := recorderServer(t, remote.Options{})
	close(r.block) // the runtime answers DeadlineExceeded at once
	_, err := c.ExecSync(context.Background(), "x", []string{"sleep", "9"}, time.Second)
	if !errors.Is(err, runtime.ErrExecTimeout) {
		t.Fatalf("ExecSync: %v, want ErrExecTimeout", err)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("code %v, want DeadlineExceeded", status.Code(err))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the runtime's timeout reads as the context's: %v", err)
	}
}

func TestExecSyncTimeoutFromContext(t *testing.T) {
	_, c := recorderServer(t, remote.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.ExecSync(ctx, "x", []string{"sleep", "9"}, 0)
	if !errors.Is(err, runtime.ErrExecTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ExecSync: %v, want ErrExecTimeout and context.DeadlineExceeded", err)
	}
	// Another failure is not a timeout.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = c.ExecSync(ctx, "x", []string{"sleep", "9"}, time.Second)
	if err == nil || errors.Is(err, runtime.ErrExecTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ExecSync with a canceled context: %v, want Canceled, not a timeout", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	_, c := recorderServer(t, remote.Options{RequestTimeout: 100 * time.Millisecond})
	_, err := c.ContainerStatus(context.Background(), "x", false)
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ContainerStatus past the request timeout: %v", err)
	}
	if errors.Is(err, runtime.ErrExecTimeout) {
		t.Errorf("a ContainerStatus timeout matches ErrExecTimeout")
	}
}

func TestReconnectAfterRuntimeRestart(t *testing.T) {
	defer leakcheck.Check(t)()
	f := runtimetest.New(runtimetest.Options{})
	path := socketPath(t)
	stop := serve(t, path, runtimetest.NewServer(f).Register)
	c, err := remote.New(remote.Options{Endpoint: "unix://" + path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Version(ctx); err != nil {
		t.Fatal(err)
	}

	stop() // the runtime goes down
	_, err = c.Version(ctx)
	if err == nil {
		t.Fatal("Version with the runtime down: nil error")
	}
	if !runtime.IsUnavailable(err) || !strings.Contains(err.Error(), "cri unix://"+path+": Version: Unavailable") {
		t.Errorf("Version with the runtime down: %v, want Unavailable naming the endpoint", err)
	}

	restart := serve(t, path, runtimetest.NewServer(f).Register) // and comes back
	defer restart()
	testenv.Eventually(t, 15*time.Second, 20*time.Millisecond, "client reconnects", func() bool {
		_, err := c.Version(ctx)
		return err == nil
	})
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Errorf("ListContainers after reconnect: %v", err)
	}
	c.Close()
	restart()
}

func TestCallsAfterClose(t *testing.T) {
	_, ep := fakeServer(t)
	c, err := remote.New(remote.Options{Endpoint: ep})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Version(context.Background()); err == nil {
		t.Error("Version after Close: nil error")
	}
	if c.Endpoint() != ep {
		t.Errorf("Endpoint() = %q", c.Endpoint())
	}
}

func TestOptionalMethodsUnimplemented(t *testing.T) {
	f, ep := fakeServer(t)
	f.SetContainerEvents(false)
	c := dial(t, remote.Options{Endpoint: ep})
	if _, err := c.ListPodSandboxMetrics(context.Background()); !runtime.IsUnimplemented(err) {
		t.Errorf("ListPodSandboxMetrics: %v, want Unimplemented", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WatchContainerEvents(ctx, func(*runtimeapi.ContainerEventResponse) {}); !runtime.IsUnimplemented(err) {
		t.Errorf("WatchContainerEvents: %v, want Unimplemented", err)
	}
}

// A stream the runtime ends (a restart) is the runtime's error, with its
// gRPC code; one the caller ends is the context's error. Each stream is one
// get_container_events operation.
func TestWatchContainerEventsEnds(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server and client close
	f, ep := fakeServer(t)
	reg := prometheus.NewRegistry()
	c := dial(t, remote.Options{Endpoint: ep, Registerer: reg})
	ctx := context.Background()
	got := make(chan *runtimeapi.ContainerEventResponse, 16)
	done := make(chan error, 1)
	go func() {
		done <- c.WatchContainerEvents(ctx, func(ev *runtimeapi.ContainerEventResponse) { got <- ev })
	}()
	testenv.Eventually(t, 5*time.Second, time.Millisecond, "stream open", func() bool { return f.ContainerEventStreams() == 1 })
	sb, err := f.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-got; ev.ContainerId != sb || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT || ev.PodSandboxStatus.GetMetadata().GetUid() != "u" {
		t.Errorf("first event %v", ev)
	}
	f.EndContainerEvents(status.Error(codes.Unavailable, "runtime restarted"))
	if err := <-done; !runtime.IsUnavailable(err) || !strings.Contains(err.Error(), "GetContainerEvents") {
		t.Errorf("WatchContainerEvents after the runtime ended it: %v, want Unavailable naming GetContainerEvents", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- c.WatchContainerEvents(cctx, func(*runtimeapi.ContainerEventResponse) {}) }()
	testenv.Eventually(t, 5*time.Second, time.Millisecond, "stream open", func() bool { return f.ContainerEventStreams() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WatchContainerEvents after cancel: %v, want context.Canceled", err)
	}
	testenv.Eventually(t, 5*time.Second, time.Millisecond, "stream closed", func() bool { return f.ContainerEventStreams() == 0 })
	want := `
# HELP kubelet_runtime_operations_total Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="get_container_events"} 2
kubelet_runtime_operations_total{operation_type="version"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_runtime_operations_total"); err != nil {
		t.Error(err)
	}
}
