package nodeapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

const currentLog = "2026-03-01T11:59:00.000000000Z stdout F line one\n" +
	"2026-03-01T11:59:30.000000000Z stderr F line two\n" +
	"2026-03-01T11:59:50.000000000Z stdout P part\n" +
	"2026-03-01T11:59:50.500000000Z stdout F ial\n" +
	"2026-03-01T11:59:55.000000000Z stdout F last\n"

func logHandler(t *testing.T) (*nodeapi.Handler, string) {
	t.Helper()
	root := t.TempDir()
	testenv.WriteTree(t, root, map[string]string{
		"ns_web_uid-1/app/0.log":       "2026-03-01T11:00:00Z stdout F old\n",
		"ns_web_uid-1/app/1.log":       currentLog,
		"ns_web_uid-1/single/0.log":    "2026-03-01T11:00:00Z stdout F only\n",
		"ns_static-node_uid-2/c/0.log": "2026-03-01T11:00:00Z stdout F static\n",
	})
	pods := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"}}}
	h := newHandler(t, nodeapi.Options{PodLogRoot: root, Clock: clocktesting.NewFakeClock(t0),
		Pods: func(context.Context) []*corev1.Pod { return pods }})
	return h, root
}

func TestContainerLogs(t *testing.T) {
	h, _ := logHandler(t)
	for _, tc := range []struct {
		name, target string
		code         int
		body         string
	}{
		{"all", "/containerLogs/ns/web/app", 200, "line one\nline two\npartial\nlast\n"},
		{"tailLines=1", "/containerLogs/ns/web/app?tailLines=1", 200, "last\n"},
		{"tailLines=2 counts file lines", "/containerLogs/ns/web/app?tailLines=2", 200, "ial\nlast\n"},
		{"tailLines=0", "/containerLogs/ns/web/app?tailLines=0", 200, ""},
		{"tailLines beyond the file", "/containerLogs/ns/web/app?tailLines=100", 200, "line one\nline two\npartial\nlast\n"},
		{"sinceSeconds", "/containerLogs/ns/web/app?sinceSeconds=20", 200, "partial\nlast\n"},
		{"sinceTime", "/containerLogs/ns/web/app?sinceTime=2026-03-01T11:59:30Z", 200, "line two\npartial\nlast\n"},
		{"timestamps", "/containerLogs/ns/web/app?timestamps=true&tailLines=3", 200,
			"2026-03-01T11:59:50.000000000Z partial\n2026-03-01T11:59:55.000000000Z last\n"},
		{"limitBytes", "/containerLogs/ns/web/app?limitBytes=12", 200, "line one\nlin"},
		{"limitBytes with timestamps", "/containerLogs/ns/web/app?limitBytes=35&timestamps=1", 200, "2026-03-01T11:59:00.000000000Z line"},
		{"previous", "/containerLogs/ns/web/app?previous=true", 200, "old\n"},
		{"previous ignores follow", "/containerLogs/ns/web/app?previous=true&follow=true", 200, "old\n"},
		{"pod found by its directory", "/containerLogs/ns/static-node/c", 200, "static\n"},
		{"previous without one", "/containerLogs/ns/web/single?previous=true", 400, ""},
		{"negative tailLines", "/containerLogs/ns/web/app?tailLines=-1", 400, ""},
		{"zero limitBytes", "/containerLogs/ns/web/app?limitBytes=0", 400, ""},
		{"bad sinceSeconds", "/containerLogs/ns/web/app?sinceSeconds=soon", 400, ""},
		{"both since", "/containerLogs/ns/web/app?sinceSeconds=1&sinceTime=2026-03-01T11:59:30Z", 400, ""},
		{"bad bool", "/containerLogs/ns/web/app?timestamps=maybe", 400, ""},
		{"missing pod", "/containerLogs/ns/nope/app", 404, ""},
		{"missing container", "/containerLogs/ns/web/nope", 404, ""},
		{"traversal in namespace", "/containerLogs/../web/app", 400, ""},
		{"traversal in container", "/containerLogs/ns/web/..", 400, ""},
		{"escaped traversal", "/containerLogs/ns/web/..%2F..%2Fetc", 400, ""},
		{"escaped dots", "/containerLogs/ns/%2e%2e/app", 400, ""},
		{"dotted name", "/containerLogs/ns/web/a..b", 400, ""},
		{"extra segment", "/containerLogs/ns/web/app/extra", 400, ""},
		{"short path", "/containerLogs/ns/web", 400, ""},
		{"absolute in name", "/containerLogs/ns/web//etc", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := get(h, tc.target)
			if w.Code != tc.code {
				t.Fatalf("GET %s = %d %q, want %d", tc.target, w.Code, w.Body, tc.code)
			}
			if tc.code == 200 && w.Body.String() != tc.body {
				t.Errorf("GET %s body %q, want %q", tc.target, w.Body, tc.body)
			}
		})
	}
}

func TestParseLogOptions(t *testing.T) {
	o, err := nodeapi.ParseLogOptions(map[string][]string{"sinceSeconds": {"30"}, "tailLines": {"5"}, "follow": {"true"}}, t0)
	if err != nil || !o.Since.Equal(t0.Add(-30*time.Second)) || o.TailLines != 5 || !o.Follow || o.Timestamps {
		t.Errorf("ParseLogOptions = %+v, %v", o, err)
	}
	if o, _ := nodeapi.ParseLogOptions(nil, t0); o.TailLines != -1 || !o.Since.IsZero() || o.LimitBytes != 0 {
		t.Errorf("defaults = %+v, want all lines, no since, no limit", o)
	}
}

// streamWriter is a ResponseWriter whose output a test reads while the
// handler writes.
type streamWriter struct {
	mu      sync.Mutex
	header  http.Header
	buf     strings.Builder
	written chan struct{} // made by waitOutput, closed by the next Write
}

func (s *streamWriter) Header() http.Header { return s.header }
func (s *streamWriter) WriteHeader(int)     {}
func (s *streamWriter) Flush()              {}
func (s *streamWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.buf.Write(b)
}
func (s *streamWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitOutput waits, woken by each Write, until the output is want, and
// fails t when it is not within 10s.
func (s *streamWriter) waitOutput(t *testing.T, want string) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got := s.buf.String()
		if s.written == nil {
			s.written = make(chan struct{})
		}
		written := s.written
		s.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-written:
		case <-deadline.C:
			t.Fatalf("output %q: not within 10s (output %q)", want, got)
		}
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestContainerLogsFollow(t *testing.T) {
	defer leakcheck.Check(t)()
	root := t.TempDir()
	dir := filepath.Join(root, "ns_web_uid-1", "app")
	log := filepath.Join(dir, "0.log")
	testenv.WriteTree(t, root, map[string]string{"ns_web_uid-1/app/0.log": "2026-03-01T12:00:00Z stdout F a\n"})
	clk := clocktesting.NewFakeClock(t0)
	h := newHandler(t, nodeapi.Options{PodLogRoot: root, Clock: clk, FollowInterval: time.Second})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &streamWriter{header: http.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/containerLogs/ns/web/app?follow=true", nil).WithContext(ctx))
	}()
	// The follower reads to the end of what is there before it waits, so
	// the test changes the files only while the follower waits: a line
	// written earlier could be read before the step that expects it.
	parked := func() {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, time.Millisecond, "the follower to wait", clk.HasWaiters)
	}
	step := func(want string) {
		t.Helper()
		clk.Step(time.Second)
		w.waitOutput(t, want)
		parked()
	}
	w.waitOutput(t, "a\n") // the first line
	parked()

	appendFile(t, log, "2026-03-01T12:00:01Z stdout P b\n2026-03-01T12:00:01Z stdout F c\n")
	step("a\nbc\n")

	// Rotation: the old file is renamed, gets one more line from a writer
	// that still has it open, and a new file takes its name.
	if err := os.Rename(log, log+".20260301-120002"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, log+".20260301-120002", "2026-03-01T12:00:02Z stdout F d\n")
	appendFile(t, log, "2026-03-01T12:00:03Z stdout F e\n")
	step("a\nbc\nd\n")
	step("a\nbc\nd\ne\n")

	// A newer run ends the follow.
	appendFile(t, filepath.Join(dir, "1.log"), "")
	clk.Step(time.Second)
	<-done

	// A client that goes away ends it too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() {
		defer close(done2)
		h.ServeHTTP(&streamWriter{header: http.Header{}}, httptest.NewRequest(http.MethodGet, "/containerLogs/ns/web/app?follow=true", nil).WithContext(ctx2))
	}()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the follower to wait", clk.HasWaiters)
	cancel2()
	<-done2
}
