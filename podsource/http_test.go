package podsource

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

// manifestServer serves whatever the test sets, and can hang.
type manifestServer struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	body     string
	hang     bool
	arrived  chan http.Header
	released chan struct{}
}

func newManifestServer(t *testing.T) *manifestServer {
	s := &manifestServer{status: http.StatusOK, arrived: make(chan http.Header, 100), released: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		status, body, hang := s.status, s.body, s.hang
		s.mu.Unlock()
		s.arrived <- r.Header.Clone()
		if hang {
			select {
			case <-r.Context().Done():
			case <-s.released:
			}
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(func() {
		close(s.released)
		s.Close()
	})
	return s
}

func (s *manifestServer) serve(status int, body string, hang bool) {
	s.mu.Lock()
	s.status, s.body, s.hang = status, body, hang
	s.mu.Unlock()
}

func (s *manifestServer) waitRequest(t *testing.T) http.Header {
	t.Helper()
	var h http.Header
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "request arrives", func() bool {
		select {
		case h = <-s.arrived:
			return true
		default:
			return false
		}
	})
	return h
}

func podList(pods ...string) string {
	items := make([]string, len(pods))
	for i, p := range pods {
		items[i] = `{"metadata":{"name":"` + p + `"},"spec":{"containers":[{"name":"c","image":"` + p + `:1"}]}}`
	}
	return `{"apiVersion":"v1","kind":"PodList","items":[` + strings.Join(items, ",") + `]}`
}

func TestHTTPSource(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	srv := newManifestServer(t)
	defer srv.Client().CloseIdleConnections()
	fc := clocktesting.NewFakeClock(seenTime)
	src, err := NewHTTP(HTTPOptions{
		URL: srv.URL + "/pods", NodeName: "n1", Clock: fc, Client: srv.Client(),
		Header: http.Header{"Authorization": {"Bearer t0ken"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMerger(MergerOptions{Sources: []PodSource{src}, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	ch := m.Updates()
	// Failing before the first good answer: nothing is sent, the source is not
	// seen. (Set before Run, so that the first fetch already fails.)
	srv.serve(http.StatusInternalServerError, "", false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	tick := func() {
		t.Helper()
		fc.Step(DefaultPeriod)
		srv.waitRequest(t)
	}

	if h := srv.waitRequest(t); h.Get("Authorization") != "Bearer t0ken" {
		t.Errorf("header not sent: %v", h)
	}
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "error recorded", func() bool { return src.LastError() != nil })
	if !strings.Contains(src.LastError().Error(), "500 Internal Server Error") {
		t.Errorf("LastError %v", src.LastError())
	}
	noUpdate(t, ch)
	if m.SeenAllSources() {
		t.Error("seen after a failed fetch")
	}

	// Good: a PodList.
	srv.serve(http.StatusOK, podList("a", "b"), false)
	tick()
	u := nextUpdate(t, ch)
	if u.Op != OpAdd || len(u.Pods) != 2 || u.Pods[0].Name != "a-n1" || u.Pods[1].Name != "b-n1" {
		t.Fatalf("update %s", describe(u))
	}
	if len(u.Pods[0].Spec.Tolerations) != 0 || u.Pods[0].Annotations[ConfigSourceAnnotation] != HTTPSource {
		t.Errorf("http pod %+v", u.Pods[0].ObjectMeta)
	}
	uidA, uidB := u.Pods[0].UID, u.Pods[1].UID

	// The same body again: nothing.
	tick()
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "fetch done", func() bool { return src.LastError() == nil })
	noUpdate(t, ch)

	// Bad answers keep the last set: server error, invalid pod, not a pod.
	for _, bad := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusNotFound, "", "404 Not Found"},
		{http.StatusOK, podList("a", "B"), `items[1].metadata.name: Invalid value: "B-n1"`},
		{http.StatusOK, "<!DOCTYPE html>\n<html><body>Sign in</body></html>", `not an object (a Pod or a PodList) but a single value; it begins "<!DOCTYPE html>"`},
	} {
		srv.serve(bad.status, bad.body, false)
		tick()
		testenv.Eventually(t, waitTimeout, 5*time.Millisecond, bad.want, func() bool {
			err := src.LastError()
			return err != nil && strings.Contains(err.Error(), bad.want)
		})
		if bad.status == http.StatusOK && !errors.Is(src.LastError(), ErrInvalidManifest) {
			t.Errorf("%v is not ErrInvalidManifest", src.LastError())
		}
		noUpdate(t, ch)
	}
	if got := len(m.Pods()); got != 2 {
		t.Errorf("%d pods after failures, want 2", got)
	}

	// Slow: the timeout, on the injected clock, ends the fetch; the set stays.
	srv.serve(http.StatusOK, podList("a"), true)
	tick()
	fc.Step(DefaultHTTPTimeout)
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "timeout", func() bool {
		err := src.LastError()
		return err != nil && errors.Is(err, context.DeadlineExceeded)
	})
	noUpdate(t, ch)

	// Changing: b goes, c comes (a's UID is unchanged: same pod, same URL).
	srv.serve(http.StatusOK, podList("a", "c"), false)
	tick()
	u = nextUpdate(t, ch)
	if u.Op != OpRemove || len(u.Pods) != 1 || u.Pods[0].UID != uidB {
		t.Fatalf("update %s", describe(u))
	}
	u = nextUpdate(t, ch)
	if u.Op != OpAdd || len(u.Pods) != 1 || u.Pods[0].Name != "c-n1" {
		t.Fatalf("update %s", describe(u))
	}
	if got := m.Pods(); len(got) != 2 || got[0].UID != uidA {
		t.Errorf("pods after change %v", got)
	}

	// A single Pod, and an empty body (an empty set, as kubelet).
	srv.serve(http.StatusOK, webYAML, false)
	tick()
	expectUpdate(t, ch, "REMOVE http [a-n1/"+string(uidA)+" c-n1/"+string(u.Pods[0].UID)+"]")
	u = nextUpdate(t, ch)
	if u.Op != OpAdd || u.Pods[0].Name != "web-n1" {
		t.Fatalf("update %s", describe(u))
	}
	srv.serve(http.StatusOK, "", false)
	tick()
	expectUpdate(t, ch, "REMOVE http [web-n1/"+string(u.Pods[0].UID)+"]")
}

func TestHTTPSourceSyncOnceList(t *testing.T) {
	srv := newManifestServer(t)
	defer srv.Client().CloseIdleConnections()
	src, err := NewHTTP(HTTPOptions{URL: srv.URL, NodeName: "n1", Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	srv.serve(http.StatusOK, `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`, false)
	if pods, ok := src.Pods(); ok || pods != nil {
		t.Fatalf("Pods before the first fetch: %v, %v", pods, ok)
	}
	err = src.SyncOnce(context.Background())
	pods, ok := src.Pods()
	if err != nil || !ok || len(pods) != 1 || pods[0].Name != "x-n1" {
		t.Fatalf("SyncOnce: %v; Pods: %v %v", err, pods, ok)
	}
	srv.serve(http.StatusBadGateway, "", false)
	err = src.SyncOnce(context.Background())
	pods, ok = src.Pods()
	if err == nil || src.LastError() != err || !ok || len(pods) != 1 {
		t.Fatalf("SyncOnce after failure: %v (LastError %v); Pods: %v %v, want an error and the last set", err, src.LastError(), pods, ok)
	}
}

func TestHTTPOptions(t *testing.T) {
	for _, tc := range []struct {
		opts HTTPOptions
		want string
	}{
		{HTTPOptions{NodeName: "n"}, "HTTPOptions.URL"},
		{HTTPOptions{URL: "file:///etc/x", NodeName: "n"}, "HTTPOptions.URL"},
		{HTTPOptions{URL: "http://x/"}, "HTTPOptions.NodeName"},
		{HTTPOptions{URL: "http://x/", NodeName: "n", Timeout: 1}, "HTTPOptions.Timeout"},
		{HTTPOptions{URL: "http://x/", NodeName: "n", Period: 48 * 3600e9}, "HTTPOptions.Period"},
	} {
		if _, err := NewHTTP(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
}
