package virtualnode_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The virtual node links none of the runtime side: no CRI client, no CRI
// syncer (cgroups, mounts, sandbox config), no pod data (tmpfs mounts), no
// usage sampling (cgroup files).
func TestLinksNoCRICgroupOrMountCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, banned := range []string{
		"github.com/nodekit/nodekit/runtime/remote",
		"github.com/nodekit/nodekit/podsync/cri",
		"github.com/nodekit/nodekit/podsync/cri/backend",
		"github.com/nodekit/nodekit/podsync/volume",
		"github.com/nodekit/nodekit/nodestatus/usage",
		"github.com/nodekit/nodekit/internal/mountinfo",
		"github.com/nodekit/nodekit/podsync/logrotate",
	} {
		for _, d := range deps {
			if d == banned {
				t.Errorf("the virtual node links %s", banned)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/nodekit/nodekit/podsync\n") {
		t.Errorf("go list shows no podsync: %s", out)
	}
}
