package controlplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/testenv"
)

// NeedMetricsServer starts metrics-server on cp (StartMetricsServer, within
// two minutes) and stops it when t ends, printing the end of its log when t
// failed. It skips t when the binary is missing (under NODEKIT_REQUIRE_ALL=1
// it fails instead), and fails it for any other error.
func NeedMetricsServer(t testing.TB, cp *ControlPlane, opts MetricsServerOptions) *MetricsServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms, err := cp.StartMetricsServer(ctx, opts)
	switch {
	case errors.Is(err, ErrUnavailable):
		testenv.Missing(t, "metrics-server", "testbin", err)
	case err != nil:
		t.Fatalf("starting metrics-server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("metrics-server's log ends with:\n%s", ms.LogTail(4096))
		}
		if err := ms.Stop(); err != nil {
			t.Errorf("stopping metrics-server: %v", err)
		}
	})
	return ms
}
