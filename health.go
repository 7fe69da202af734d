package nodekit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/internal/httpserve"
)

// HealthServer serves an agent's /healthz ("ok") and /metrics on a local
// address, as the kubelet serves its healthz port (127.0.0.1:10248).
type HealthServer struct {
	listener net.Listener
	server   *http.Server
}

// NewHealthServer binds address now, so that a busy port is an error at
// start, and serves metrics (a promhttp handler) on /metrics once Run runs.
func NewHealthServer(address string, metrics http.Handler) (*HealthServer, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("nodekit: health server: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", metrics)
	return &HealthServer{listener: ln, server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// Addr is the address the server listens on.
func (s *HealthServer) Addr() net.Addr { return s.listener.Addr() }

// Run serves until ctx ends, then shuts the server down (a second at
// most for requests in flight) and returns nil.
func (s *HealthServer) Run(ctx context.Context) error {
	klog.FromContext(ctx).Info("Serving /healthz and /metrics", "address", s.listener.Addr().String())
	return httpserve.Run(ctx, s.server, time.Second, func() error { return s.server.Serve(s.listener) })
}
