package nodeapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// gzipped reports whether b is a gzip stream, as the proto profiles are.
func gzipped(b []byte) bool { return bytes.HasPrefix(b, []byte{0x1f, 0x8b}) }

func TestProfilesServed(t *testing.T) {
	h := newHandler(t, nodeapi.Options{})
	if w := get(h, "/debug/pprof/heap"); w.Code != http.StatusOK || !gzipped(w.Body.Bytes()) {
		t.Fatalf("heap: %d, %d bytes, gzip %v", w.Code, w.Body.Len(), gzipped(w.Body.Bytes()))
	}
	if w := get(h, "/debug/pprof/goroutine?debug=1"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "goroutine profile:") {
		t.Fatalf("goroutine?debug=1: %d %q", w.Code, w.Body.String())
	}
	if w := get(h, "/debug/pprof/"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "\theap\n") {
		t.Fatalf("index: %d %q", w.Code, w.Body.String())
	}
	for target, code := range map[string]int{
		"/debug/pprof/nosuch":              http.StatusNotFound,
		"/debug/pprof/heap?debug=3":        http.StatusBadRequest,
		"/debug/pprof/profile?seconds=0":   http.StatusBadRequest,
		"/debug/pprof/profile?seconds=301": http.StatusBadRequest,
		"/debug/pprof/profile?seconds=x":   http.StatusBadRequest,
	} {
		if w := get(h, target); w.Code != code {
			t.Errorf("%s: %d, want %d (%q)", target, w.Code, code, w.Body.String())
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/debug/pprof/heap", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST heap: %d, want 405", w.Code)
	}
}

func TestProfilingDisabled(t *testing.T) {
	h := newHandler(t, nodeapi.Options{DisableProfiling: true})
	for _, target := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if w := get(h, target); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", target, w.Code)
		}
	}
}

// TestCPUProfileRunsOnTheClock: the profile lasts ?seconds on the
// handler's clock, and a second one while it runs is refused.
func TestCPUProfileRunsOnTheClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	h := newHandler(t, nodeapi.Options{Clock: clk})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- get(h, "/debug/pprof/profile?seconds=5") }()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the CPU profile waiting on the clock", clk.HasWaiters)
	if w := get(h, "/debug/pprof/profile?seconds=1"); w.Code != http.StatusConflict {
		t.Errorf("a second CPU profile: %d, want 409 (%q)", w.Code, w.Body.String())
	}
	clk.Step(4 * time.Second)
	select {
	case w := <-done:
		t.Fatalf("the profile ended after 4s of 5: %d", w.Code)
	default:
	}
	clk.Step(time.Second)
	select {
	case w := <-done:
		if w.Code != http.StatusOK || !gzipped(w.Body.Bytes()) {
			t.Fatalf("CPU profile: %d, %d bytes", w.Code, w.Body.Len())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the profile did not end when its 5s had passed on the clock")
	}
}
