package nodekit

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

func TestServeHealthzAndMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	if _, err := CountRequests(reg); err != nil {
		t.Fatal(err)
	}
	s, err := NewHealthServer("127.0.0.1:0", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewHealthServer(s.Addr().String(), http.NotFoundHandler()); err == nil {
		t.Error("a second server on the same address: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for path, want := range map[string]string{"/healthz": "ok", "/metrics": "# HELP"} {
		resp, err := client.Get("http://" + s.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, b)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
