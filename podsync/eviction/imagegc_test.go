package eviction_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

var (
	_ eviction.ImageRuntime = runtime.Runtime(nil)
	_ eviction.ImageRuntime = (*runtimetest.Runtime)(nil)
)

// imageNode is a fake runtime with images of known sizes on a 1000-byte
// image file system.
type imageNode struct {
	rt    *runtimetest.Runtime
	clock *clocktesting.FakeClock
	gc    *eviction.ImageGC
	ctx   context.Context
}

func newImageNode(t *testing.T, images map[string]uint64, o eviction.ImageGCOptions) *imageNode {
	t.Helper()
	n := &imageNode{clock: clocktesting.NewFakeClock(t0)}
	_, n.ctx = ktesting.NewTestContext(t)
	n.rt = runtimetest.New(runtimetest.Options{Clock: n.clock, Images: images})
	o.Runtime = n.rt
	o.Clock = n.clock
	o.ImageFS = func(ctx context.Context) (*eviction.FsStats, error) {
		resp, err := n.rt.ImageFsInfo(ctx)
		if err != nil {
			return nil, err
		}
		used := resp.ImageFilesystems[0].UsedBytes.Value
		return &eviction.FsStats{CapacityBytes: 1000, AvailableBytes: 1000 - used}, nil
	}
	gc, err := eviction.NewImageGC(o)
	if err != nil {
		t.Fatal(err)
	}
	n.gc = gc
	return n
}

// run starts a container of image in a new sandbox and returns its ID.
func (n *imageNode) run(t *testing.T, name, image string) string {
	t.Helper()
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name}}
	sid, err := n.rt.RunPodSandbox(n.ctx, sb, "")
	if err != nil {
		t.Fatal(err)
	}
	cid, err := n.rt.CreateContainer(n.ctx, sid, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image},
	}, sb)
	if err != nil {
		t.Fatal(err)
	}
	return cid
}

func (n *imageNode) images(t *testing.T) []string {
	t.Helper()
	imgs, err := n.rt.ListImages(n.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range imgs {
		out = append(out, img.RepoTags[0])
	}
	return out
}

// Reclaim removes every unused image old enough, least recently used
// first, and keeps images in use, pinned, or seen less than MinAge ago.
func TestImageGCReclaim(t *testing.T) {
	n := newImageNode(t, map[string]uint64{
		runtimetest.PauseImage: 10, "app:1": 100, "app:2": 200, "tool:1": 50,
	}, eviction.ImageGCOptions{PinnedImages: []string{runtimetest.PauseImage}})
	n.run(t, "tool", "tool:1")
	old := n.run(t, "app2", "app:2")
	if freed, err := n.gc.Reclaim(n.ctx, eviction.SignalImageFsAvailable); err != nil || freed != 0 {
		t.Fatalf("at first sight: freed %d, %v; want nothing (MinAge)", freed, err)
	}
	n.clock.Step(time.Minute)
	if err := n.rt.RemoveContainer(n.ctx, old); err != nil {
		t.Fatal(err)
	}
	n.rt.AddImage("new:1", 300) // first seen at the next detection
	n.clock.Step(2 * time.Minute)
	freed, err := n.gc.Reclaim(n.ctx, eviction.SignalImageFsAvailable)
	if err != nil || freed != 300 {
		t.Fatalf("freed %d, %v; want 300 (app:1 and app:2)", freed, err)
	}
	if got, want := n.images(t), []string{"new:1", runtimetest.PauseImage, "tool:1"}; !slices.Equal(got, want) {
		t.Errorf("images left %v, want %v", got, want)
	}
	var removed []string
	for _, c := range n.rt.Calls() {
		if c.Method == "RemoveImage" {
			removed = append(removed, c.ID)
		}
	}
	// app:1 was never used, app:2 last used a minute in: app:1 goes first.
	if len(removed) != 2 || !strings.HasPrefix(removed[0], "sha256:") {
		t.Errorf("removed %v", removed)
	}
}

// GarbageCollect starts at the high threshold and frees down to the low
// one, least recently used first.
func TestImageGCGarbageCollect(t *testing.T) {
	n := newImageNode(t, map[string]uint64{
		runtimetest.PauseImage: 100, "a:1": 300, "b:1": 300, "c:1": 200,
	}, eviction.ImageGCOptions{PinnedImages: []string{runtimetest.PauseImage}})
	// 900 of 1000 bytes used: 90% ≥ 85%. c:1 is in use, a:1 was until now.
	n.run(t, "c", "c:1")
	a := n.run(t, "a", "a:1")
	if freed, err := n.gc.GarbageCollect(n.ctx); freed != 0 || err == nil {
		t.Fatalf("at first sight: freed %d, %v; want an error (nothing old enough)", freed, err)
	}
	if err := n.rt.RemoveContainer(n.ctx, a); err != nil {
		t.Fatal(err)
	}
	n.clock.Step(eviction.DefaultImageMinimumGCAge)
	// To 80%, 200 bytes available: 100 more are needed; b:1 (300, never
	// used) suffices and goes before a:1 (used two minutes ago).
	freed, err := n.gc.GarbageCollect(n.ctx)
	if err != nil || freed != 300 {
		t.Fatalf("freed %d, %v; want 300", freed, err)
	}
	if got, want := n.images(t), []string{"a:1", "c:1", runtimetest.PauseImage}; !slices.Equal(got, want) {
		t.Errorf("images left %v, want %v", got, want)
	}
	// 60%: below the high threshold, nothing to do.
	if freed, err := n.gc.GarbageCollect(n.ctx); freed != 0 || err != nil {
		t.Errorf("below the threshold: freed %d, %v", freed, err)
	}
}

func TestImageGCErrors(t *testing.T) {
	if _, err := eviction.NewImageGC(eviction.ImageGCOptions{}); err == nil {
		t.Error("no runtime: no error")
	}
	rt := runtimetest.New(runtimetest.Options{})
	for _, o := range []eviction.ImageGCOptions{
		{Runtime: rt, HighThresholdPercent: 101},
		{Runtime: rt, HighThresholdPercent: 70, LowThresholdPercent: 75},
		{Runtime: rt, MinAge: -time.Second},
		{Runtime: rt, Period: time.Millisecond},
	} {
		if _, err := eviction.NewImageGC(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	n := newImageNode(t, map[string]uint64{"a:1": 900}, eviction.ImageGCOptions{})
	n.clock.Step(time.Hour)
	_, _ = n.gc.Reclaim(n.ctx, eviction.SignalImageFsAvailable) // first sight
	n.clock.Step(time.Hour)
	boom := errors.New("boom")
	fail := runtimetest.Errors(boom)
	n.rt.SetHooks(runtimetest.Hooks{RemoveImage: func(context.Context, *runtimeapi.ImageSpec) error { return fail() }})
	if _, err := n.gc.Reclaim(n.ctx, eviction.SignalImageFsAvailable); !errors.Is(err, boom) {
		t.Errorf("remove failure: %v", err)
	}
	fail = runtimetest.Errors(boom)
	n.rt.SetHooks(runtimetest.Hooks{ListImages: func(context.Context, *runtimeapi.ImageFilter) error { return fail() }})
	if _, err := n.gc.GarbageCollect(n.ctx); !errors.Is(err, boom) {
		t.Errorf("list failure: %v", err)
	}
}

// Run collects every Period and returns nil when its context ends.
func TestImageGCRun(t *testing.T) {
	defer leakcheck.Check(t)()
	n := newImageNode(t, map[string]uint64{"a:1": 100}, eviction.ImageGCOptions{})
	lists := func() int { return n.rt.CallCount("ListImages") }
	ctx, cancel := context.WithCancel(n.ctx)
	done := make(chan error, 1)
	go func() { done <- n.gc.Run(ctx) }()
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "first collection", func() bool { return lists() == 1 && n.clock.HasWaiters() })
	n.clock.Step(eviction.DefaultImageGCPeriod)
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "second collection", func() bool { return lists() == 2 && n.clock.HasWaiters() })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v", err)
	}
}
