package nodeapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op, steadier than ns/op on shared cores: call it
// before the loop and the function it returns after.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

// BenchmarkSample is one usage sample of a node with 30 pods and 100
// containers on the fake runtime (its CRI calls are in-process) and a fake
// /proc and /sys.
func BenchmarkSample(b *testing.B) {
	f := newFixtureCounts(b, benchCounts())
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		f.clk.Step(10 * time.Second)
		if err := f.coll.SyncOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchmarkServe(b *testing.B, target string) {
	f := newFixtureCounts(b, benchCounts())
	h := newHandler(b, nodeapi.Options{Stats: f.coll})
	req := httptest.NewRequest(http.MethodGet, target, nil)
	b.ReportAllocs()
	defer reportCPU(b)()
	var n int
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
		n = w.Body.Len()
	}
	b.ReportMetric(float64(n), "bytes/response")
}

// BenchmarkServeSummary serves /stats/summary of 30 pods and 100 containers.
func BenchmarkServeSummary(b *testing.B) { benchmarkServe(b, "/stats/summary") }

// BenchmarkServeSummaryCPUMemory serves /stats/summary?only_cpu_and_memory=true.
func BenchmarkServeSummaryCPUMemory(b *testing.B) {
	benchmarkServe(b, "/stats/summary?only_cpu_and_memory=true")
}

// BenchmarkServeMetricsResource serves /metrics/resource of 30 pods and 100
// containers.
func BenchmarkServeMetricsResource(b *testing.B) { benchmarkServe(b, "/metrics/resource") }

// BenchmarkSampleRuntimeCalls is the fake runtime's part of
// BenchmarkSample: the five CRI calls a sample makes, answered in-process.
func BenchmarkSampleRuntimeCalls(b *testing.B) {
	f := newFixtureCounts(b, benchCounts())
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		_, _ = f.rt.ListPodSandbox(ctx, nil)
		_, _ = f.rt.ListContainers(ctx, nil)
		_, _ = f.rt.ListContainerStats(ctx, nil)
		_, _ = f.rt.ListPodSandboxStats(ctx, nil)
		_, _ = f.rt.ImageFsInfo(ctx)
	}
}

// okHandler is the handler behind the auth benchmarks: what they measure
// is the wrapper.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

// codeWriter is a ResponseWriter that keeps only the status.
type codeWriter struct {
	h    http.Header
	code int
}

func (w *codeWriter) Header() http.Header         { return w.h }
func (w *codeWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *codeWriter) WriteHeader(code int)        { w.code = code }

// benchmarkWrapped serves one request over and over, prepare readying it
// each time, so that what differs between handlers is the handler.
func benchmarkWrapped(b *testing.B, h http.Handler, prepare func(*http.Request)) {
	r := httptest.NewRequest(http.MethodGet, "/stats/summary", nil)
	w := &codeWriter{h: http.Header{}}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		prepare(r)
		w.code = http.StatusOK
		h.ServeHTTP(w, r)
		if w.code != http.StatusOK {
			b.Fatal(w.code)
		}
	}
}

func setToken(r *http.Request) { r.Header.Set("Authorization", "Bearer tok") }

// BenchmarkAuthNone is the baseline of the auth benchmarks: the handler
// alone, the token header set as in BenchmarkAuthTokenWarm.
func BenchmarkAuthNone(b *testing.B) { benchmarkWrapped(b, okHandler, setToken) }

// BenchmarkAuthTokenWarm is a bearer token whose TokenReview and
// SubjectAccessReview answers are cached.
func BenchmarkAuthTokenWarm(b *testing.B) {
	f := newAuthFixture(b, nil)
	f.rv.tokens["tok"] = authenticationv1.UserInfo{Username: "u", Groups: []string{"g"}}
	f.rv.grants["u get stats"] = true
	benchmarkWrapped(b, f.auth.Wrap(okHandler), setToken)
	if tr, sar := f.rv.counts(); tr != 1 || sar != 1 {
		b.Fatalf("reviews %d, %d; want 1, 1", tr, sar)
	}
}

// BenchmarkAuthCertVerify is a client certificate verified on each
// request (the cost when a handler is wrapped without Server, which
// verifies once per connection), the decision cached.
func BenchmarkAuthCertVerify(b *testing.B) {
	f := newAuthFixture(b, nil)
	cert := f.ca.client(b, "u", []string{"g"}, t0.Add(time.Hour))
	f.rv.grants["u get stats"] = true
	h := f.auth.Wrap(okHandler)
	state := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert.Leaf}}
	benchmarkWrapped(b, h, func(r *http.Request) { r.TLS = state })
}

// benchmarkServer is a GET of /stats/summary over one kept-alive TLS 1.3
// connection on loopback, through Server.
func benchmarkServer(b *testing.B, auth func(f *authFixture) (nodeapi.AuthOptions, *tls.Certificate, string)) {
	f := newAuthFixture(b, nil)
	opts, cert, token := auth(f)
	opts.Clock = f.clk
	s, err := nodeapi.NewServer(nodeapi.ServerOptions{Handler: okHandler, Auth: opts,
		Hostnames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	defer func() { cancel(); <-done }()
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+ln.Addr().String()+"/stats/summary", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.StatusCode)
		}
	}
}

// BenchmarkServerAnonymous is the baseline: anonymous, AlwaysAllow.
func BenchmarkServerAnonymous(b *testing.B) {
	benchmarkServer(b, func(*authFixture) (nodeapi.AuthOptions, *tls.Certificate, string) {
		return nodeapi.AuthOptions{NodeName: "node-1", Anonymous: true, AlwaysAllow: true}, nil, ""
	})
}

// BenchmarkServerCertWarm is a client certificate, verified once for the
// connection, the decision cached.
func BenchmarkServerCertWarm(b *testing.B) {
	benchmarkServer(b, func(f *authFixture) (nodeapi.AuthOptions, *tls.Certificate, string) {
		cert := f.ca.client(b, "u", []string{"g"}, t0.Add(time.Hour))
		f.rv.grants["u get stats"] = true
		cs := f.rv.clientset()
		return nodeapi.AuthOptions{NodeName: "node-1", ClientCAs: f.ca.pool(),
			SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews()}, &cert, ""
	})
}

// BenchmarkServerTokenWarm is a bearer token, review answers cached.
func BenchmarkServerTokenWarm(b *testing.B) {
	benchmarkServer(b, func(f *authFixture) (nodeapi.AuthOptions, *tls.Certificate, string) {
		f.rv.tokens["tok"] = authenticationv1.UserInfo{Username: "u"}
		f.rv.grants["u get stats"] = true
		cs := f.rv.clientset()
		return nodeapi.AuthOptions{NodeName: "node-1", TokenReviews: cs.AuthenticationV1().TokenReviews(),
			SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews()}, nil, "tok"
	})
}
