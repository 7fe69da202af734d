package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

func TestRunStopsOnContextAndReturnsServeFailures(t *testing.T) {
	defer leakcheck.Check(t)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, srv, 0, func() error { return srv.Serve(ln) }); err != nil {
		t.Errorf("Run after ctx ended: %v", err)
	}
	boom := errors.New("boom")
	if err := Run(context.Background(), &http.Server{}, 0, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Run with a failing serve: %v", err)
	}
}
