package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/runtime"
)

func newHandlers(t testing.TB, o HandlerOptions) *Handlers {
	t.Helper()
	h, err := NewHandlers(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// probeServer is an HTTP server on loopback with the paths the tests use.
type probeServer struct {
	*httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	last  *http.Request
}

func newProbeServer(t testing.TB) *probeServer {
	s := &probeServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.last = r.Clone(context.Background())
		s.mu.Unlock()
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "broken")
	})
	mux.HandleFunc("/notfound", http.NotFound)
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 3*MaxOutputBytes))
	})
	mux.HandleFunc("/redirect/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/redirect/"))
		if n <= 0 {
			http.Redirect(w, r, "/ok", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := net.SplitHostPort(r.Host)
		http.Redirect(w, r, "http://127.0.0.2:"+port+"/ok", http.StatusFound)
	})
	s.Server = httptest.NewUnstartedServer(mux)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *probeServer) hostPort(t testing.TB) (string, int) {
	host, p, err := net.SplitHostPort(s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return host, port
}

func httpSpec(path string, port int) *corev1.Probe {
	return &corev1.Probe{
		TimeoutSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(int32(port)),
		}},
	}
}

func TestHTTPGet(t *testing.T) {
	t.Cleanup(noLeaks(t))
	srv := newProbeServer(t)
	ip, port := srv.hostPort(t)
	h := newHandlers(t, HandlerOptions{})
	target := Target{PodIP: ip}
	ctx := context.Background()

	cases := []struct {
		path    string
		want    Result
		warning bool
		msg     string
	}{
		{"/ok", Success, false, "ok"},
		{"/fail", Failure, false, "HTTP probe failed with statuscode: 500"},
		{"/notfound", Failure, false, "HTTP probe failed with statuscode: 404"},
		{"/redirect/3", Success, false, "ok"},
		{"/redirect/8", Success, false, "ok"},      // 9 redirects, 10 requests
		{"/redirect/9", Failure, false, "stopped"}, // the 10th redirect is refused
		{"/loop", Failure, false, "stopped after 10 redirects"},
		{"/elsewhere", Success, true, "Probe terminated redirects"},
		{"/slow", Failure, false, "Client.Timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			start := time.Now()
			out := h.Probe(ctx, httpSpec(tc.path, port), target)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %v, want about the 1s timeout at most", took)
			}
			if out.Err != nil || out.Result != tc.want || out.Warning != tc.warning || !strings.Contains(out.Message, tc.msg) {
				t.Errorf("got %+v, want %v warning=%v with %q", out, tc.want, tc.warning, tc.msg)
			}
		})
	}
}

func TestHTTPGetRequest(t *testing.T) {
	srv := newProbeServer(t)
	ip, port := srv.hostPort(t)
	ctx := context.Background()

	h := newHandlers(t, HandlerOptions{Version: "1.99"})
	c := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	spec := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/ok?x=1", Port: intstr.FromString("http"),
		HTTPHeaders: []corev1.HTTPHeader{{Name: "Host", Value: "example.test"}, {Name: "X-Probe", Value: "a"}},
	}}}
	out := h.Probe(ctx, spec, Target{PodIP: ip, Container: c})
	if out.Result != Success {
		t.Fatalf("got %+v", out)
	}
	srv.mu.Lock()
	r := srv.last
	srv.mu.Unlock()
	if got := r.Header.Get("User-Agent"); got != "kube-probe/1.99" {
		t.Errorf("User-Agent %q", got)
	}
	if got := r.Header.Get("Accept"); got != "*/*" {
		t.Errorf("Accept %q", got)
	}
	if r.Host != "example.test" || r.Header.Get("X-Probe") != "a" || r.URL.RawQuery != "x=1" {
		t.Errorf("host %q, X-Probe %q, query %q", r.Host, r.Header.Get("X-Probe"), r.URL.RawQuery)
	}
	if r.Header.Get("Accept-Encoding") != "" {
		t.Errorf("Accept-Encoding %q sent", r.Header.Get("Accept-Encoding"))
	}

	// User-Agent and Accept as set; an empty Accept sends none.
	spec.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: ""}}
	if out := h.Probe(ctx, spec, Target{PodIP: ip, Container: c}); out.Result != Success {
		t.Fatalf("got %+v", out)
	}
	srv.mu.Lock()
	r = srv.last
	srv.mu.Unlock()
	if r.Header.Get("User-Agent") != "mine" || len(r.Header.Values("Accept")) != 0 {
		t.Errorf("User-Agent %q, Accept %q", r.Header.Get("User-Agent"), r.Header.Values("Accept"))
	}

	// Host defaults to the pod IP; an explicit host wins.
	spec2 := httpSpec("/ok", port)
	spec2.HTTPGet.Host = ip
	if out := h.Probe(ctx, spec2, Target{PodIP: "127.0.0.99"}); out.Result != Success {
		t.Errorf("explicit host: %+v", out)
	}

	// An unknown named port is an error, not a verdict.
	spec.HTTPGet.Port = intstr.FromString("nope")
	if out := h.Probe(ctx, spec, Target{PodIP: ip, Container: c}); out.Result != Unknown || !errors.Is(out.Err, ErrInvalidPort) {
		t.Errorf("unknown port: %+v", out)
	}
	spec.HTTPGet.Port = intstr.FromInt32(70000)
	if out := h.Probe(ctx, spec, Target{PodIP: ip}); !errors.Is(out.Err, ErrInvalidPort) {
		t.Errorf("port 70000: %+v", out)
	}
}

func TestHTTPGetBodyBoundedAndNoReuse(t *testing.T) {
	t.Cleanup(noLeaks(t))
	srv := newProbeServer(t)
	ip, port := srv.hostPort(t)
	h := newHandlers(t, HandlerOptions{})
	out := h.Probe(context.Background(), httpSpec("/big", port), Target{PodIP: ip})
	if out.Result != Success || len(out.Message) != MaxOutputBytes {
		t.Fatalf("result %v, message of %d bytes, want %d", out.Result, len(out.Message), MaxOutputBytes)
	}
	before := srv.conns.Load()
	for range 3 {
		if out := h.Probe(context.Background(), httpSpec("/ok", port), Target{PodIP: ip}); out.Result != Success {
			t.Fatal(out)
		}
	}
	if got := srv.conns.Load() - before; got != 3 {
		t.Errorf("3 probes opened %d connections, want 3 (no reuse)", got)
	}
}

func TestHTTPSGet(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls") }))
	defer srv.Close()
	host, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	h := newHandlers(t, HandlerOptions{})
	spec := httpSpec("/", port)
	spec.HTTPGet.Scheme = corev1.URISchemeHTTPS
	if out := h.Probe(context.Background(), spec, Target{PodIP: host}); out.Result != Success || out.Message != "tls" {
		t.Errorf("got %+v", out)
	}
}

func tcpSpec(port int) *corev1.Probe {
	return &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
}

// acceptAndClose listens on a loopback port that accepts connections and
// closes them at once, until the test ends, and returns the port.
func acceptAndClose(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// endlessHeaders listens on a loopback port whose connections answer a
// status line and then headers without end, until the client hangs up.
func endlessHeaders(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() { ln.Close(); wg.Wait() })
	line := []byte("X-Padding: " + strings.Repeat("a", 1000) + "\r\n")
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 4096)
				_, _ = c.Read(buf) // the request
				if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\n")); err != nil {
					return
				}
				for {
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// A target that sends endless headers fails the probe after a few KiB: 16
// probes at once allocate well under a MiB each (Go's default would read 10
// MiB of headers per probe).
func TestHTTPGetBoundsResponseHeaders(t *testing.T) {
	t.Cleanup(noLeaks(t))
	port := endlessHeaders(t)
	h := newHandlers(t, HandlerOptions{})
	const probes = 16
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	var wg sync.WaitGroup
	outs := make([]Outcome, probes)
	for i := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = h.Probe(context.Background(), httpSpec("/", port), Target{PodIP: "127.0.0.1"})
		}()
	}
	wg.Wait()
	goruntime.ReadMemStats(&after)
	for _, out := range outs {
		if out.Result != Failure || !strings.Contains(out.Message, "response headers exceed") {
			t.Fatalf("probe of endless headers: %+v, want a Failure that says the headers are too large", out)
		}
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d probes of endless headers allocated %d KiB in all", probes, allocated>>10)
	if limit := uint64(probes) << 20; allocated > limit {
		t.Errorf("%d probes of endless headers allocated %d KiB, want under %d KiB", probes, allocated>>10, limit>>10)
	}
}

func TestTCPSocket(t *testing.T) {
	t.Cleanup(noLeaks(t))
	port := acceptAndClose(t)
	h := newHandlers(t, HandlerOptions{})
	if out := h.Probe(context.Background(), tcpSpec(port), Target{PodIP: "127.0.0.1"}); out.Result != Success {
		t.Errorf("open port: %+v", out)
	}
	// A port nobody listens on.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln2.Addr().(*net.TCPAddr).Port
	ln2.Close()
	if out := h.Probe(context.Background(), tcpSpec(closed), Target{PodIP: "127.0.0.1"}); out.Result != Failure || !strings.Contains(out.Message, "refused") {
		t.Errorf("closed port: %+v", out)
	}
}

// grpcServer serves the health service (svc SERVING, sick NOT_SERVING) on
// loopback, and returns its port and a server without the health service.
func grpcServers(t testing.TB) (healthPort, barePort int) {
	t.Helper()
	start := func(register func(*grpc.Server)) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		register(s)
		go func() { _ = s.Serve(ln) }()
		t.Cleanup(s.Stop)
		return ln.Addr().(*net.TCPAddr).Port
	}
	healthPort = start(func(s *grpc.Server) {
		hs := health.NewServer()
		hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus("sick", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(s, hs)
	})
	barePort = start(func(*grpc.Server) {})
	return healthPort, barePort
}

func grpcSpec(port int, service *string) *corev1.Probe {
	return &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port), Service: service}}}
}

func TestGRPC(t *testing.T) {
	t.Cleanup(noLeaks(t))
	hp, bp := grpcServers(t)
	h := newHandlers(t, HandlerOptions{})
	ptr := func(s string) *string { return &s }
	target := Target{PodIP: "127.0.0.1"}
	cases := []struct {
		name    string
		port    int
		service *string
		want    Result
		msg     string
	}{
		{"overall", hp, nil, Success, "service healthy"},
		{"service", hp, ptr("svc"), Success, "service healthy"},
		{"not serving", hp, ptr("sick"), Failure, "NOT_SERVING"},
		{"unknown service", hp, ptr("nope"), Failure, "NotFound"},
		{"no health service", bp, nil, Failure, "does not implement the grpc health protocol"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := h.Probe(context.Background(), grpcSpec(tc.port, tc.service), target)
			if out.Result != tc.want || !strings.Contains(out.Message, tc.msg) {
				t.Errorf("got %+v, want %v with %q", out, tc.want, tc.msg)
			}
		})
	}
}

// TestHangingTargets: a target that accepts and then says nothing costs a
// probe no more than its timeout.
func TestHangingTargets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	h := newHandlers(t, HandlerOptions{})
	for name, spec := range map[string]*corev1.Probe{
		"http": httpSpec("/", port),
		"grpc": grpcSpec(port, nil),
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			out := h.Probe(context.Background(), spec, Target{PodIP: "127.0.0.1"})
			took := time.Since(start)
			if out.Result != Failure {
				t.Errorf("got %+v", out)
			}
			if took < 900*time.Millisecond || took > 2500*time.Millisecond {
				t.Errorf("took %v, want about the 1s timeout", took)
			}
		})
	}
	// The caller's context ends a probe early too.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	spec := httpSpec("/", port)
	spec.TimeoutSeconds = 30
	if out := h.Probe(ctx, spec, Target{PodIP: "127.0.0.1"}); out.Result != Failure || time.Since(start) > 2*time.Second {
		t.Errorf("cancelled: %+v after %v", out, time.Since(start))
	}
}

// fakeExecer scripts ExecSync by the command's first word.
type fakeExecer struct {
	mu    sync.Mutex
	calls [][]string
	ids   []string
}

func (f *fakeExecer) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtime.ExecResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, cmd)
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	switch cmd[0] {
	case "ok":
		return &runtime.ExecResult{Stdout: []byte("out "), Stderr: []byte("err")}, nil
	case "fail":
		return &runtime.ExecResult{Stdout: []byte("bad"), ExitCode: 2}, nil
	case "silent-fail":
		return &runtime.ExecResult{ExitCode: 7}, nil
	case "big":
		return &runtime.ExecResult{Stdout: []byte(strings.Repeat("o", MaxOutputBytes)), Stderr: []byte(strings.Repeat("e", MaxOutputBytes))}, nil
	case "hang": // honours its timeout as a runtime does
		select {
		case <-time.After(timeout):
			return nil, fmt.Errorf("after %v: %w", timeout, runtime.ErrExecTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "deaf": // ignores timeout and context alike
		time.Sleep(3 * time.Second)
		return &runtime.ExecResult{}, nil
	case "broken":
		return nil, errors.New("container not found")
	case "panic":
		panic("boom")
	case "echo":
		return &runtime.ExecResult{Stdout: []byte(strings.Join(cmd[1:], " "))}, nil
	}
	return nil, errors.New("unscripted")
}

func execSpec(cmd ...string) *corev1.Probe {
	return &corev1.Probe{TimeoutSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}
}

func TestExec(t *testing.T) {
	fe := &fakeExecer{}
	h := newHandlers(t, HandlerOptions{Execer: fe, ExecGrace: 200 * time.Millisecond})
	target := Target{ContainerID: "containerd://abc"}
	cases := []struct {
		cmd  string
		want Result
		msg  string
		err  bool
	}{
		{"ok", Success, "out err", false},
		{"fail", Failure, "bad", false},
		{"silent-fail", Failure, "command exited with code 7", false},
		{"hang", Failure, "timed out", false},
		{"deaf", Failure, "timed out", false},
		{"broken", Unknown, "container not found", true},
		{"panic", Unknown, "boom", true},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			start := time.Now()
			out := h.Probe(context.Background(), execSpec(tc.cmd), target)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %v", took)
			}
			if out.Result != tc.want || !strings.Contains(out.Message, tc.msg) || (out.Err != nil) != tc.err {
				t.Errorf("got %+v, want %v with %q", out, tc.want, tc.msg)
			}
		})
	}
	fe.mu.Lock()
	if fe.ids[0] != "abc" {
		t.Errorf("container ID %q, want the bare ID", fe.ids[0])
	}
	fe.mu.Unlock()

	out := h.Probe(context.Background(), execSpec("big"), target)
	if out.Result != Success || len(out.Message) != MaxOutputBytes || !strings.HasPrefix(out.Message, "ooo") {
		t.Errorf("big output: %v, %d bytes", out.Result, len(out.Message))
	}

	c := &corev1.Container{Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{}}}}
	out = h.Probe(context.Background(), execSpec("echo", "$(A)", "$(B)", "$$(A)", "x$(A)y", "$(C", "$"), Target{ContainerID: "abc", Container: c})
	if want := "1 $(B) $(A) x1y $(C $"; out.Message != want {
		t.Errorf("expansion: got %q, want %q", out.Message, want)
	}

	if out := newHandlers(t, HandlerOptions{}).Probe(context.Background(), execSpec("ok"), target); !errors.Is(out.Err, ErrNoExecer) {
		t.Errorf("no execer: %+v", out)
	}
	if out := h.Probe(context.Background(), &corev1.Probe{}, target); !errors.Is(out.Err, ErrNoHandler) {
		t.Errorf("no handler: %+v", out)
	}
}

// deadlineExecer records the deadline of the context ExecSync is called with.
type deadlineExecer struct {
	deadline time.Time
	ok       bool
}

func (d *deadlineExecer) ExecSync(ctx context.Context, _ string, _ []string, _ time.Duration) (*runtime.ExecResult, error) {
	d.deadline, d.ok = ctx.Deadline()
	return &runtime.ExecResult{}, nil
}

// kubelet lets the runtime enforce an exec probe's timeout: the call's own
// deadline is the runtime request timeout (2m) past the probe's timeout, not
// a second.
func TestExecLeavesTheTimeoutToTheRuntime(t *testing.T) {
	de := &deadlineExecer{}
	h := newHandlers(t, HandlerOptions{Execer: de})
	start := time.Now()
	if out := h.Probe(context.Background(), execSpec("true"), Target{ContainerID: "abc"}); out.Result != Success {
		t.Fatalf("probe: %+v", out)
	}
	if !de.ok {
		t.Fatal("ExecSync's context has no deadline: a runtime that never answers would hold the probe for ever")
	}
	if left := de.deadline.Sub(start); left < time.Second+DefaultExecGrace-time.Second || left > time.Second+DefaultExecGrace+time.Second {
		t.Errorf("ExecSync's deadline is %v after the probe began, want the 1s timeout plus %v", left, DefaultExecGrace)
	}
}

func TestNewOptions(t *testing.T) {
	for _, o := range []HandlerOptions{{Version: "v1"}, {Version: "1.2.3"}, {ExecGrace: -time.Second}, {ExecGrace: 2 * time.Hour}, {Product: "kube probe"}, {Product: "a/b"}} {
		if _, err := NewHandlers(o); err == nil {
			t.Errorf("NewHandlers(%+v) accepted", o)
		}
	}
}

func TestDefaults(t *testing.T) {
	got := Defaults(&corev1.Probe{})
	if got.TimeoutSeconds != 1 || got.PeriodSeconds != 10 || got.SuccessThreshold != 1 || got.FailureThreshold != 3 || got.InitialDelaySeconds != 0 {
		t.Errorf("got %+v", got)
	}
}
