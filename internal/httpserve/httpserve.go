// Package httpserve runs an http.Server until a context ends, the one way
// nodekit's servers (the node API, an agent's health server) stop.
package httpserve

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Run calls serve (srv.Serve or srv.ServeTLS on a listener) until it fails
// or ctx ends; then it shuts srv down, waiting grace at most for requests
// in flight before closing it, and returns nil. A failure of serve before
// ctx ended is returned.
func Run(ctx context.Context, srv *http.Server, grace time.Duration, serve func() error) error {
	done := make(chan error, 1)
	go func() { done <- serve() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
