package containerdtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// EnableNetwork gives the instance a CNI configuration (a loopback-only
// network that is never used: the tests' pods use the host network) so that
// its CRI status reports NetworkReady, without which a node agent reports the
// node NotReady. It returns once the runtime says so, or when ctx ends.
func (c *Containerd) EnableNetwork(ctx context.Context) error {
	confDir := filepath.Join(c.Dir, "cni", "conf")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	conf := `{"cniVersion": "0.4.0", "name": "nodekit-test", "plugins": [{"type": "loopback"}]}`
	if err := os.WriteFile(filepath.Join(confDir, "10-nodekit-test.conflist"), []byte(conf), 0o644); err != nil {
		return err
	}
	rs := c.RuntimeClient()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := rs.Status(ctx, &runtimeapi.StatusRequest{})
		if err == nil {
			for _, cond := range st.GetStatus().GetConditions() {
				if cond.GetType() == runtimeapi.NetworkReady && cond.GetStatus() {
					return nil
				}
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("containerd does not report NetworkReady after a CNI config was written to %s (last status %v, %v): %w", confDir, st, err, ctx.Err())
		}
	}
}
