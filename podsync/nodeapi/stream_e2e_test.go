package nodeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/runtime/remote"
)

// e2ePod is a host-network busybox pod run on the real containerd with a
// container "main" that keeps an echo server on port and a container "cat"
// whose process echoes its stdin, and the node API handler serving it on
// httptest.
type e2ePod struct {
	rt        *remote.Client
	sandbox   string
	container string
	// containers are the pod's containers by name, for Container.
	containers map[string]string
	port       int
	h          *nodeapi.Handler
	srv        *httptest.Server
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func newE2EPod(t testing.TB, c *containerdtest.Containerd) *e2ePod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	p := &e2ePod{rt: rt, port: freePort(t), containers: map[string]string{}}
	sbCfg := c.SandboxConfig("streams", "e2e", "streams-uid")
	if p.sandbox, err = rt.RunPodSandbox(ctx, sbCfg, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.RemovePodSandbox(context.Background(), p.sandbox); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	// nc -ll keeps listening, running cat (an echo) for each connection.
	cfg := c.BusyboxContainer("main", "nc", "-ll", "-p", fmt.Sprint(p.port), "-e", "/bin/cat")
	if p.container, err = rt.CreateContainer(ctx, p.sandbox, cfg, sbCfg); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, p.container); err != nil {
		t.Fatal(err)
	}
	p.containers["main"] = p.container
	// cat's process reads an open stdin, for attach.
	catCfg := c.BusyboxContainer("cat", "cat")
	catCfg.Stdin = true
	catID, err := rt.CreateContainer(ctx, p.sandbox, catCfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, catID); err != nil {
		t.Fatal(err)
	}
	p.containers["cat"] = catID
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "the pod's echo server listening", func() bool {
		conn, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", p.port))
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})

	h, err := nodeapi.New(nodeapi.Options{
		Runtime: rt,
		Container: func(_ context.Context, ns, pod, uid, ctr string) (string, bool) {
			id, ok := p.containers[ctr]
			return id, ok && ns == "e2e" && pod == "streams" && (uid == "" || uid == "streams-uid")
		},
		Sandbox: func(_ context.Context, ns, pod, uid string) (string, bool) {
			return p.sandbox, ns == "e2e" && pod == "streams" && (uid == "" || uid == "streams-uid")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.h = h
	p.srv = httptest.NewServer(h)
	t.Cleanup(p.srv.Close)
	return p
}

// exec runs a command through /exec with client-go's SPDY executor.
func (p *e2ePod) exec(ctx context.Context, query string, stdin io.Reader) (stdout, stderr string, err error) {
	u, err := url.Parse(p.srv.URL + "/exec/e2e/streams/main?" + query)
	if err != nil {
		return "", "", err
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: p.srv.URL}, "POST", u)
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &out}
	if strings.Contains(query, "error=1") {
		opts.Stderr = &errOut
	}
	if stdin != nil {
		opts.Stdin = stdin
	}
	err = ex.StreamWithContext(ctx, opts)
	return out.String(), errOut.String(), err
}

func TestE2EExecAttachPortForward(t *testing.T) {
	c := containerdtest.Need(t, ctrd)
	p := newE2EPod(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Output and exit code.
	q := url.Values{"command": {"sh", "-c", "echo hi; echo oops >&2; exit 3"}, "output": {"1"}, "error": {"1"}}
	stdout, stderr, err := p.exec(ctx, q.Encode(), nil)
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Errorf("exec exit: %v, want exit code 3", err)
	}
	if stdout != "hi\n" || stderr != "oops\n" {
		t.Errorf("exec stdout %q stderr %q, want hi and oops", stdout, stderr)
	}

	// Input, through the path with the pod's UID.
	q = url.Values{"command": {"cat"}, "input": {"1"}, "output": {"1"}}
	u, _ := url.Parse(p.srv.URL + "/exec/e2e/streams/streams-uid/main?" + q.Encode())
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: p.srv.URL}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("line one\nline two\n"), Stdout: &out}); err != nil {
		t.Errorf("exec cat: %v", err)
	}
	if out.String() != "line one\nline two\n" {
		t.Errorf("exec cat echoed %q", out.String())
	}

	// Through Server: TLS, and Auth (anonymous, always allowed) in front.
	_, addr := runServer(t, nodeapi.ServerOptions{
		Handler: p.h,
		Auth:    nodeapi.AuthOptions{NodeName: "node-1", Anonymous: true, AlwaysAllow: true},
	})
	tu, _ := url.Parse(addr + "/exec/e2e/streams/main?" + url.Values{"command": {"echo", "over tls"}, "output": {"1"}}.Encode())
	tx, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: addr, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, "POST", tu)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := tx.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "over tls\n" {
		t.Errorf("exec through Server: %q, %v", out.String(), err)
	}

	// /run: ExecSync.
	resp, err := http.Post(p.srv.URL+"/run/e2e/streams/main?cmd="+url.QueryEscape("echo run"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "run\n" {
		t.Errorf("/run: %s %q, want 200 run", resp.Status, b)
	}

	// A container the pod does not have, and a request that is not an
	// upgrade.
	su, _ := url.Parse(p.srv.URL + "/exec/e2e/streams/side?command=true&output=1")
	sx, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: p.srv.URL}, "POST", su)
	if err != nil {
		t.Fatal(err)
	}
	if err := sx.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), `container not found ("side")`) {
		t.Errorf("exec in a missing container: %v, want container not found", err)
	}
	resp, err = http.Get(p.srv.URL + "/exec/e2e/streams/main?command=true&output=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain GET of /exec: %s, want 400", resp.Status)
	}

	// Port-forward to the pod's echo server.
	pu, _ := url.Parse(p.srv.URL + "/portForward/e2e/streams")
	transport, upgrader, err := spdy.RoundTripperFor(&rest.Config{Host: p.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", pu)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", p.port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v", err)
	case <-ctx.Done():
		t.Fatal("port-forward not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("GetPorts = %v, %v", ports, err)
	}
	conn, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("through the tunnel\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if line != "through the tunnel\n" {
		t.Errorf("port-forward echo %q, %v", line, err)
	}
	_ = conn.Close()
	close(stop)
	if err := <-done; err != nil {
		t.Errorf("ForwardPorts: %v", err)
	}

	// Attach to a container whose process is cat on an open stdin: what
	// is written comes back; cancelling ends the session.
	au, _ := url.Parse(p.srv.URL + "/attach/e2e/streams/cat?input=1&output=1")
	ax, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: p.srv.URL}, "POST", au)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	attached := make(chan error, 1)
	go func() {
		attached <- ax.StreamWithContext(actx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW})
		_ = outW.Close()
	}()
	go func() { _, _ = inW.Write([]byte("attached\n")) }()
	line, err = bufio.NewReader(outR).ReadString('\n')
	if line != "attached\n" {
		t.Errorf("attach echo %q, %v", line, err)
	}
	acancel()
	_ = inW.Close()
	<-attached
}

// BenchmarkE2EExec measures an exec round trip through the handler: a
// SPDY upgrade proxied to containerd's streaming server, running true
// with stdout, to its exit.
func BenchmarkE2EExec(b *testing.B) {
	c := containerdtest.Need(b, ctrd)
	p := newE2EPod(b, c)
	ctx := context.Background()
	q := url.Values{"command": {"true"}, "output": {"1"}}.Encode()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := p.exec(ctx, q, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkE2EExecDirect is BenchmarkE2EExec without the handler: the
// client opens the URL containerd's Exec returns itself.
func BenchmarkE2EExecDirect(b *testing.B) {
	c := containerdtest.Need(b, ctrd)
	p := newE2EPod(b, c)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		raw, err := p.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: p.container, Cmd: []string{"true"}, Stdout: true})
		if err != nil {
			b.Fatal(err)
		}
		u, err := url.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: u.Scheme + "://" + u.Host}, "POST", u)
		if err != nil {
			b.Fatal(err)
		}
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard}); err != nil {
			b.Fatal(err)
		}
	}
}
