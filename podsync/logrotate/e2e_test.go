package logrotate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/remote"
)

var ctrd, ctrd2 *containerdtest.Containerd

func TestMain(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }

// On containerd 1.x and 2: a container that keeps logging has its log
// rotated three times; containerd reopens the log each time and goes on
// writing to it, and no more than MaxFiles files are left, the older
// rotated ones gzipped.
func TestE2ERotationOnContainerd(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, rotation)
}

func rotation(t *testing.T, c *containerdtest.Containerd) {
	ctx := context.Background()
	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cfg := c.SandboxConfig("logger", "default", "uid-logger")
	sb, err := rt.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = rt.StopPodSandbox(ctx, sb)
		_ = rt.RemovePodSandbox(ctx, sb)
		_ = os.RemoveAll(cfg.LogDirectory)
	}()
	cc := c.BusyboxContainer("app", "sh", "-c", "while true; do head -c 4000 /dev/zero | tr '\\0' x; echo; usleep 5000; done")
	id, err := rt.CreateContainer(ctx, sb, cc, cfg)
	if err == nil {
		err = rt.StartContainer(ctx, id)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.LogDirectory, cc.LogPath)
	const maxSize = 64 << 10
	m, err := New(Options{Runtime: rt, MaxSize: maxSize, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	for i := range 3 {
		testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "log at MaxSize", func() bool { return size() >= maxSize })
		if err := m.SyncOnce(ctx); err != nil {
			t.Fatalf("rotation %d: %v", i, err)
		}
		// containerd writes the reopened log from its start.
		testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "log reopened and written", func() bool { s := size(); return s > 0 && s < maxSize })
	}
	matches, _ := filepath.Glob(path + ".*")
	gz := 0
	for _, f := range matches {
		if strings.HasSuffix(f, ".gz") {
			gz++
		}
	}
	if len(matches) != 2 || gz != 1 {
		t.Errorf("rotated files %v, want MaxFiles-1 = 2, the older gzipped", matches)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), " stdout ") {
		t.Errorf("the reopened log is not in the CRI format: %.80q (%v)", b, err)
	}
}
