package containerdtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
)

// A test package starts one containerd in TestMain and each test asks for it
// with Need, which skips when containerd is unavailable.
func ExampleMain() {
	var ctrd *containerdtest.Containerd
	testMain := func(m *testing.M) { os.Exit(containerdtest.Main(m, &ctrd)) }
	testPod := func(t *testing.T) {
		c := containerdtest.Need(t, ctrd)
		ctx := context.Background()
		rt := c.RuntimeClient()
		sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{
			Config: c.SandboxConfig("web", "default", "uid-1"),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Log("sandbox", sb.PodSandboxId)
	}
	_, _ = testMain, testPod
}

// Start and Stop can also be called directly, for a test that needs an
// instance of its own.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := containerdtest.Start(ctx, containerdtest.Options{})
	if err != nil {
		fmt.Println(err) // wraps ErrUnavailable when, e.g., not root
		return
	}
	defer c.Stop()
	fmt.Println(c.Endpoint, c.PauseImage, c.BusyboxImage)
}

// A package whose tests run on the host's containerd 1.x and on
// containerd 2 starts both in TestMain; Need2 skips (or fails under
// NODEKIT_REQUIRE_ALL=1) when containerd 2 is unavailable.
func ExampleMainBoth() {
	var ctrd, ctrd2 *containerdtest.Containerd
	testMain := func(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }
	testBoth := func(t *testing.T) {
		for _, c := range []*containerdtest.Containerd{containerdtest.Need(t, ctrd), containerdtest.Need2(t, ctrd2)} {
			t.Logf("containerd %s (major %d) at %s", c.RuntimeVersion, c.Major, c.Endpoint)
		}
	}
	_, _ = testMain, testBoth
}
