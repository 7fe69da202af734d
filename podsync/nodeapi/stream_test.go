package nodeapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// streamFixture is a fake runtime with one pod (ns/web, uid uid-web) of
// one running container (main), a streaming server for the fake's URLs
// that upgrades to a raw echo, and a handler that finds the pod through
// Container and Sandbox.
type streamFixture struct {
	rt        *runtimetest.Runtime
	sandbox   string
	container string
	h         *nodeapi.Handler
	srv       *httptest.Server

	mu      sync.Mutex
	headers []http.Header // what the streaming server received
}

func newStreamFixture(t *testing.T, mod func(*nodeapi.Options)) *streamFixture {
	t.Helper()
	ctx := context.Background()
	f := &streamFixture{rt: runtimetest.New(runtimetest.Options{})}
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "uid-web"}}
	var err error
	if f.sandbox, err = f.rt.RunPodSandbox(ctx, sbCfg, ""); err != nil {
		t.Fatal(err)
	}
	cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "main"}, Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}
	if f.container, err = f.rt.CreateContainer(ctx, f.sandbox, cfg, sbCfg); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.StartContainer(ctx, f.container); err != nil {
		t.Fatal(err)
	}

	backend := httptest.NewServer(http.HandlerFunc(f.serveStream))
	t.Cleanup(backend.Close)
	f.rt.SetStreamURL(backend.URL)

	opts := nodeapi.Options{
		Runtime: f.rt,
		Container: func(_ context.Context, ns, pod, uid, ctr string) (string, bool) {
			if ns == "ns" && pod == "web" && (uid == "" || uid == "uid-web") && ctr == "main" {
				return f.container, true
			}
			return "", false
		},
		Sandbox: func(_ context.Context, ns, pod, uid string) (string, bool) {
			if ns == "ns" && pod == "web" && (uid == "" || uid == "uid-web") {
				return f.sandbox, true
			}
			return "", false
		},
	}
	if mod != nil {
		mod(&opts)
	}
	f.h, err = nodeapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(f.srv.Close)
	return f
}

// serveStream upgrades, writes a line describing the session's request,
// then echoes what it reads.
func (f *streamFixture) serveStream(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	req, ok := f.rt.StreamRequest(r.URL.Path)
	if !ok {
		http.Error(w, "no such session", http.StatusNotFound)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	_, _ = brw.WriteString(describe(req) + "\n")
	_ = brw.Flush()
	_, _ = io.Copy(conn, brw)
}

// describe summarizes a CRI streaming request in one line.
func describe(m proto.Message) string {
	switch r := m.(type) {
	case *runtimeapi.ExecRequest:
		return fmt.Sprintf("exec %s %q in=%v out=%v err=%v tty=%v", r.ContainerId[:8], r.Cmd, r.Stdin, r.Stdout, r.Stderr, r.Tty)
	case *runtimeapi.AttachRequest:
		return fmt.Sprintf("attach %s in=%v out=%v err=%v tty=%v", r.ContainerId[:8], r.Stdin, r.Stdout, r.Stderr, r.Tty)
	case *runtimeapi.PortForwardRequest:
		return fmt.Sprintf("portforward %s %v", r.PodSandboxId[:8], r.Port)
	}
	return "?"
}

// upgrade opens a raw connection to the handler, asks to upgrade path and
// returns the response and the connection.
func (f *streamFixture) upgrade(t *testing.T, method, path string, hdr http.Header) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	req, _ := http.NewRequest(method, "http://"+f.srv.Listener.Addr().String()+path, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	for k, v := range hdr {
		req.Header[k] = v
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, conn, br
}

func TestExecProxiesUpgrade(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the fixture's cleanups
	f := newStreamFixture(t, nil)
	for _, path := range []string{
		"/exec/ns/web/main?command=sh&command=-c&command=echo+hi&input=1&output=1&error=1",
		"/exec/ns/web/uid-web/main?command=sh&command=-c&command=echo+hi&input=1&output=1&error=1",
	} {
		resp, conn, br := f.upgrade(t, http.MethodPost, path, http.Header{"Authorization": {"Bearer secret"}})
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %s %s", path, resp.Status, b)
		}
		line, _ := br.ReadString('\n')
		want := fmt.Sprintf("exec %s %q in=true out=true err=true tty=false\n", f.container[:8], []string{"sh", "-c", "echo hi"})
		if line != want {
			t.Errorf("%s: the runtime's session is %q, want %q", path, line, want)
		}
		if _, err := conn.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if echo, _ := br.ReadString('\n'); echo != "ping\n" {
			t.Errorf("%s: echo %q, want ping", path, echo)
		}
		_ = conn.Close()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.headers {
		if h.Get("Authorization") != "" {
			t.Errorf("the runtime's streaming server got the client's Authorization header")
		}
	}
}

func TestAttachAndPortForwardProxy(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", TTY: true, Stdin: true}}}}
	f := newStreamFixture(t, func(o *nodeapi.Options) {
		o.Pods = func(context.Context) []*corev1.Pod { return []*corev1.Pod{pod} }
	})
	for _, tc := range []struct {
		path string
		hdr  http.Header
		want string
	}{
		// The tty is the container spec's; with it, stderr is dropped.
		{"/attach/ns/web/main?input=1&output=1&error=1", nil, fmt.Sprintf("attach %s in=true out=true err=false tty=true\n", f.container[:8])},
		{"/portForward/ns/web", nil, fmt.Sprintf("portforward %s []\n", f.sandbox[:8])},
		{"/portForward/ns/web/uid-web", nil, fmt.Sprintf("portforward %s []\n", f.sandbox[:8])},
		// A WebSocket names its ports in the query; the client's bearer
		// protocol is not passed on.
		{"/portForward/ns/web?port=80&port=8080,443", http.Header{
			"Upgrade":                {"websocket"},
			"Sec-Websocket-Protocol": {"portforward.k8s.io, base64url.bearer.authorization.k8s.io.c2VjcmV0"},
		}, fmt.Sprintf("portforward %s [80 8080 443]\n", f.sandbox[:8])},
	} {
		resp, _, br := f.upgrade(t, http.MethodGet, tc.path, tc.hdr)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("%s: %s %s", tc.path, resp.Status, b)
			continue
		}
		if line, _ := br.ReadString('\n'); line != tc.want {
			t.Errorf("%s: the runtime's session is %q, want %q", tc.path, line, tc.want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.headers[len(f.headers)-1]
	if got := last.Get("Sec-Websocket-Protocol"); got != "portforward.k8s.io" {
		t.Errorf("the streaming server got protocols %q, want portforward.k8s.io alone", got)
	}
}

func TestStreamErrors(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	f := newStreamFixture(t, func(o *nodeapi.Options) {
		o.Pods = func(context.Context) []*corev1.Pod { return []*corev1.Pod{pod} }
	})
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/exec/ns/web/main?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"GET", "/exec/ns/web/main?output=1", 400, "no command"},
		{"GET", "/exec/ns/web?command=ls&output=1", 400, "want /exec/<namespace>/<pod>/[<uid>/]<container>"},
		{"GET", "/exec/ns/web/../main?command=ls&output=1", 400, "want /exec/"},
		{"GET", "/exec/ns/web/a/b/c?command=ls&output=1", 400, "want /exec/"},
		{"PUT", "/exec/ns/web/main?command=ls&output=1", 405, "method not allowed"},
		{"GET", "/exec/ns/other/main?command=ls&output=1", 404, "pod does not exist"},
		{"GET", "/exec/ns/web/side?command=ls&output=1", 404, `container not found ("side")`},
		{"GET", "/exec/ns/web/uid-old/main?command=ls&output=1", 404, `container not found ("main")`},
		{"GET", "/attach/ns/web/side?output=1", 404, "container side not found in pod web_ns"},
		{"GET", "/attach/ns/web/uid-old/main?output=1", 404, "container main not found in pod web_ns"},
		{"GET", "/portForward/ns/other", 404, "pod does not exist"},
		{"GET", "/portForward/ns/web/uid-old", 404, "pod not found"},
		{"GET", "/portForward/ns/web/main/x", 400, "want /portForward/<namespace>/<pod>[/<uid>]"},
		{"GET", "/run/ns/web/main?cmd=ls", 405, "method not allowed"},
		// Not an upgrade: refused before the runtime is asked.
		{"GET", "/exec/ns/web/main?command=ls&output=1", 400, "Upgrade request required"},
		{"POST", "/portForward/ns/web", 400, "Upgrade request required"},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if !strings.Contains(tc.body, "Upgrade") {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "test")
		}
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s = %d %q, want %d containing %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}

	for _, c := range f.rt.Calls() {
		if c.Method == "Exec" || c.Method == "Attach" || c.Method == "PortForward" {
			t.Errorf("the runtime was asked for a session (%s) for a request refused", c.Method)
		}
	}

	// WebSocket ports that are not ports.
	resp, _, _ := f.upgrade(t, "GET", "/portForward/ns/web?port=0", http.Header{"Upgrade": {"websocket"}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("port=0 over a WebSocket: %s, want 400", resp.Status)
	}

	// The runtime's errors: NotFound is 404, ResourceExhausted 429,
	// anything else (a container that is not running) 500.
	fail := runtimetest.Errors(status.Error(codes.NotFound, "container gone"), status.Error(codes.ResourceExhausted, "too many"))
	f.rt.SetHooks(runtimetest.Hooks{Exec: func(context.Context, *runtimeapi.ExecRequest) error { return fail() }})
	for _, code := range []int{404, 429} {
		resp, _, _ := f.upgrade(t, "GET", "/exec/ns/web/main?command=ls&output=1", nil)
		if resp.StatusCode != code {
			t.Errorf("runtime error: %s, want %d", resp.Status, code)
		}
	}
	if err := f.rt.Exit(f.container, 0); err != nil {
		t.Fatal(err)
	}
	resp, _, _ = f.upgrade(t, "GET", "/exec/ns/web/main?command=ls&output=1", nil)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 500 || !strings.Contains(string(b), "CONTAINER_EXITED") {
		t.Errorf("exec in an exited container: %s %s, want 500 naming its state", resp.Status, b)
	}
}

func TestStreamWithoutRuntime(t *testing.T) {
	h, err := nodeapi.New(nodeapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/exec/ns/web/main?command=ls&output=1", "/attach/ns/web/main?output=1", "/portForward/ns/web"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s without a runtime: %d, want 503", p, rec.Code)
		}
	}
}

func TestRun(t *testing.T) {
	f := newStreamFixture(t, nil)
	f.rt.ScriptExec(f.container, []string{"echo", "hi"}, runtimetest.ExecScript{Stdout: "hi\n", Stderr: "warn\n"})
	f.rt.ScriptExec(f.container, []string{"false"}, runtimetest.ExecScript{Stderr: "bad\n", ExitCode: 3})
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/run/ns/web/main?cmd=echo+hi", 200, "hi\nwarn\n"},
		{"/run/ns/web/uid-web/main?cmd=echo%20hi", 200, "hi\nwarn\n"},
		{"/run/ns/web/main?cmd=false", 500, "command 'false' exited with 3: bad\n"},
		{"/run/ns/web/main?cmd=true", 200, ""},
		{"/run/ns/web/side?cmd=true", 404, `container not found ("side")`},
	} {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, httptest.NewRequest("POST", tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("POST %s = %d %q, want %d with %q", tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
	var cmds [][]string
	for _, c := range f.rt.Calls() {
		if c.Method == "ExecSync" {
			cmds = append(cmds, c.Cmd)
		}
	}
	want := [][]string{{"echo", "hi"}, {"echo", "hi"}, {"false"}, {"true"}}
	if !slices.EqualFunc(cmds, want, slices.Equal) {
		t.Errorf("ExecSync commands %q, want %q", cmds, want)
	}
}

func TestParseStreamOptions(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want nodeapi.StreamOptions
		err  bool
	}{
		{"command=ls&command=-l&output=1", nodeapi.StreamOptions{Command: []string{"ls", "-l"}, Stdout: true}, false},
		{"input=1&output=1&error=1&tty=1", nodeapi.StreamOptions{Stdin: true, Stdout: true, TTY: true}, false},
		{"output=true", nodeapi.StreamOptions{}, true}, // only "1" turns a stream on
		{"", nodeapi.StreamOptions{}, true},
	} {
		req := httptest.NewRequest("GET", "/exec/a/b/c?"+tc.q, nil)
		got, err := nodeapi.ParseStreamOptions(req.URL.Query())
		if (err != nil) != tc.err || (!tc.err && !streamOptionsEqual(got, tc.want)) {
			t.Errorf("ParseStreamOptions(%q) = %+v, %v; want %+v (error %v)", tc.q, got, err, tc.want, tc.err)
		}
	}
}

func streamOptionsEqual(a, b nodeapi.StreamOptions) bool {
	return slices.Equal(a.Command, b.Command) && a.Stdin == b.Stdin && a.Stdout == b.Stdout && a.Stderr == b.Stderr && a.TTY == b.TTY
}

func TestPodStates(t *testing.T) {
	ctx := context.Background()
	pods := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u2"}}}
	states := map[types.UID]*podsync.PodState{
		"u1": {UID: "u1", Namespace: "ns", Name: "web", // an earlier pod of the same name
			Sandboxes:  []*podsync.SandboxState{{ID: "sb-old", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
			Containers: []*podsync.ContainerState{{ID: "c-old", Name: "main", State: runtimeapi.ContainerState_CONTAINER_RUNNING}}},
		"u2": {UID: "u2", Namespace: "ns", Name: "web",
			Sandboxes: []*podsync.SandboxState{
				{ID: "sb-new", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
				{ID: "sb-ready", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
			Containers: []*podsync.ContainerState{
				{ID: "c-exited", Name: "main", State: runtimeapi.ContainerState_CONTAINER_EXITED},
				{ID: "c-run", Name: "main", State: runtimeapi.ContainerState_CONTAINER_RUNNING}}},
	}
	ps := nodeapi.PodStates{
		Pods:  func(context.Context) []*corev1.Pod { return pods },
		State: func(uid types.UID) *podsync.PodState { return states[uid] },
	}
	for _, tc := range []struct {
		ns, name, uid, ctr string
		want               string
	}{
		{"ns", "web", "", "main", "c-run"},
		{"ns", "web", "u2", "main", "c-run"},
		{"ns", "web", "u1", "main", "c-old"},
		{"ns", "web", "", "side", ""},
		{"ns", "other", "u2", "main", ""},
		{"ns", "other", "", "main", ""},
	} {
		got, ok := ps.Container(ctx, tc.ns, tc.name, tc.uid, tc.ctr)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Container(%s, %s, %q, %s) = %q, %v; want %q", tc.ns, tc.name, tc.uid, tc.ctr, got, ok, tc.want)
		}
	}
	if got, ok := ps.Sandbox(ctx, "ns", "web", ""); got != "sb-ready" || !ok {
		t.Errorf("Sandbox = %q, %v; want sb-ready", got, ok)
	}
	if got, ok := ps.Sandbox(ctx, "ns", "web", "u1"); got != "sb-old" || !ok {
		t.Errorf("Sandbox(uid u1) = %q, %v; want sb-old", got, ok)
	}
	if _, ok := ps.Sandbox(ctx, "ns", "gone", ""); ok {
		t.Errorf("Sandbox of a pod not run: found one")
	}
}
