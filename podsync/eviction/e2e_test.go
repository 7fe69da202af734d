package eviction_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/runtime/remote"
)

// ctrd and ctrd2 are the real containerd 1.x and 2 the end-to-end test
// uses; nil in -short mode or when one is not available (its subtest then
// skips).
var ctrd, ctrd2 *containerdtest.Containerd

func TestMain(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }

// TestE2EImageGC: on containerd 1.x and 2, an image a container uses and
// the pinned sandbox image are kept; once the container is gone, its image
// is removed.
func TestE2EImageGC(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, imageGC)
}

func imageGC(t *testing.T, c *containerdtest.Containerd) {
	_, ctx := ktesting.NewTestContext(t)
	client, err := remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	clk := clocktesting.NewFakeClock(time.Now())
	gc, err := eviction.NewImageGC(eviction.ImageGCOptions{Runtime: client, PinnedImages: []string{c.PauseImage}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	sb := c.SandboxConfig("imagegc", "default", "uid-imagegc")
	sid, err := client.RunPodSandbox(ctx, sb, "")
	if err != nil {
		t.Fatal(err)
	}
	cid, err := client.CreateContainer(ctx, sid, c.BusyboxContainer("app", "sleep", "60"), sb)
	if err != nil {
		t.Fatal(err)
	}
	tags := func() []string {
		imgs, err := client.ListImages(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, img := range imgs {
			out = append(out, img.RepoTags...)
		}
		slices.Sort(out)
		return out
	}
	before := tags()
	if !slices.Contains(before, c.BusyboxImage) || !slices.Contains(before, c.PauseImage) {
		t.Fatalf("images %v", before)
	}
	for i, step := range []time.Duration{0, 3 * time.Minute} {
		clk.Step(step)
		if freed, err := gc.Reclaim(ctx, eviction.SignalImageFsAvailable); err != nil || freed != 0 {
			t.Fatalf("reclaim %d with the container: freed %d, %v", i, freed, err)
		}
	}
	if err := client.RemoveContainer(ctx, cid); err != nil {
		t.Fatal(err)
	}
	if err := client.RemovePodSandbox(ctx, sid); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	freed, err := gc.Reclaim(ctx, eviction.SignalImageFsAvailable)
	if err != nil || freed == 0 {
		t.Fatalf("reclaim after the container: freed %d, %v", freed, err)
	}
	after := tags()
	if slices.Contains(after, c.BusyboxImage) || !slices.Contains(after, c.PauseImage) {
		t.Errorf("images after reclaim %v; want busybox gone, pause kept", after)
	}
	t.Logf("freed %d bytes; images %v -> %v", freed, before, after)
}
