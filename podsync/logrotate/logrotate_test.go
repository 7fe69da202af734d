package logrotate

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime/runtimetest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// running starts a container on the fake whose log is <dir>/<name>/0.log.
func running(t *testing.T, rt *runtimetest.Runtime, dir, name string) (id, path string) {
	t.Helper()
	ctx := context.Background()
	sbc := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}, LogDirectory: dir}
	sb, err := rt.RunPodSandbox(ctx, sbc, "")
	if err != nil {
		t.Fatal(err)
	}
	cc := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}, LogPath: name + "/0.log"}
	if id, err = rt.CreateContainer(ctx, sb, cc, sbc); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, name, "0.log")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	return id, path
}

func write(t *testing.T, path string, n int, fill byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte{fill}, n), 0o640); err != nil {
		t.Fatal(err)
	}
}

func files(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	var out []string
	for _, f := range m {
		if f != path {
			out = append(out, strings.TrimPrefix(f, path))
		}
	}
	return out
}

func TestRotation(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	rt := runtimetest.New(runtimetest.Options{Clock: clk})
	dir := t.TempDir()
	id, path := running(t, rt, dir, "app")
	m, err := New(Options{Runtime: rt, MaxSize: 1024, MaxFiles: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	write(t, path, 1023, 'a')
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := files(t, path); strings.Join(got, " ") != "" {
		t.Fatalf("a log below MaxSize was rotated: %v", got)
	}

	// Four rotations, each after the runtime wrote a full log again.
	for i, fill := range []byte("abcd") {
		rt.ResetCalls()
		write(t, path, 1024+i, fill)
		if err := m.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		reopened := false
		for _, c := range rt.Calls() {
			reopened = reopened || (c.Method == "ReopenContainerLog" && c.ID == id)
		}
		if !reopened {
			t.Fatalf("rotation %d: the runtime was not asked to reopen the log", i)
		}
		clk.Step(time.Second)
	}
	// MaxFiles-1 rotated files are left (the log being written is the
	// last), all but the newest compressed.
	got := files(t, path)
	want := []string{".20260102-030407.gz", ".20260102-030408"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", got, want)
	}
	zr, err := os.Open(path + want[0])
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	r, err := gzip.NewReader(zr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(b, bytes.Repeat([]byte{'c'}, 1026)) {
		t.Fatalf("compressed file holds %d bytes (%v), want the third log", len(b), err)
	}

	// The runtime has not reopened the log: the next look asks again.
	rt.ResetCalls()
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if c := rt.Calls(); len(c) < 2 || c[len(c)-1].Method != "ReopenContainerLog" {
		t.Errorf("calls %v, want a reopen of the missing log", c)
	}
}

func TestReopenFailureGivesTheNameBack(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	rt := runtimetest.New(runtimetest.Options{Clock: clk})
	dir := t.TempDir()
	_, bad := running(t, rt, dir, "bad")
	_, good := running(t, rt, dir, "good")
	write(t, bad, 2048, 'x')
	write(t, good, 2048, 'y')
	m, err := New(Options{Runtime: rt, MaxSize: 1024, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	fail := runtimetest.Errors(errors.New("reopen refused"))
	rt.SetHooks(runtimetest.Hooks{ReopenContainerLog: func(context.Context, string) error { return fail() }})
	err = m.SyncOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "reopen refused") {
		t.Fatalf("SyncOnce: %v, want the reopen error", err)
	}
	// The container whose reopen failed keeps its log where the runtime
	// writes it; the other is rotated.
	rotated, kept := 0, 0
	for _, p := range []string{bad, good} {
		r := files(t, p)
		_, err := os.Stat(p)
		switch {
		case len(r) == 1 && err != nil:
			rotated++
		case len(r) == 0 && err == nil:
			kept++
		default:
			t.Errorf("%s: rotated files %v, log there: %v", p, r, err == nil)
		}
	}
	if rotated != 1 || kept != 1 {
		t.Errorf("%d rotated and %d kept, want one of each", rotated, kept)
	}
}

func TestLeftoversCleaned(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	rt := runtimetest.New(runtimetest.Options{Clock: clk})
	dir := t.TempDir()
	_, path := running(t, rt, dir, "app")
	write(t, path, 2048, 'a')
	write(t, path+".20260101-000000", 10, 'o')
	write(t, path+".20260101-000000.gz", 10, 'z')     // complete compressed copy: the original goes
	write(t, path+".20260101-000001.gz.tmp", 10, 't') // interrupted compression
	m, err := New(Options{Runtime: rt, MaxSize: 1024, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := files(t, path)
	want := []string{".20260101-000000.gz", ".20260102-030405"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", got, want)
	}
}

func TestOptions(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	for _, tc := range []struct {
		o   Options
		err string
	}{
		{Options{}, "logrotate: Options.Runtime is required"},
		{Options{Runtime: rt, MaxSize: 10}, "logrotate: Options.MaxSize 10 must be in [1024, 1099511627776]"},
		{Options{Runtime: rt, MaxFiles: 1}, "logrotate: Options.MaxFiles 1 must be in [2, 1000]"},
		{Options{Runtime: rt, MonitorInterval: time.Second}, "logrotate: Options.MonitorInterval 1s must be in [3s, 1h0m0s]"},
		{Options{Runtime: rt}, ""},
	} {
		_, err := New(tc.o)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("New(%+v) = %v, want %q", tc.o, err, tc.err)
		}
	}
}

// reopenWatcher calls onReopen before passing ReopenContainerLog on, and
// answers ContainerStatus for gone with NotFound.
type reopenWatcher struct {
	*runtimetest.Runtime
	onReopen func()
	gone     string
}

func (r *reopenWatcher) ReopenContainerLog(ctx context.Context, id string) error {
	if r.onReopen != nil {
		r.onReopen()
	}
	return r.Runtime.ReopenContainerLog(ctx, id)
}

func (r *reopenWatcher) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if id == r.gone {
		return nil, grpcstatus.Errorf(codes.NotFound, "container %q: not found", id)
	}
	return r.Runtime.ContainerStatus(ctx, id, verbose)
}

// The log is renamed and reopened before the older rotated file is
// compressed: a fast writer starts a new file at once, not after the
// compression.
func TestRotationReopensBeforeCompressing(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	fake := runtimetest.New(runtimetest.Options{Clock: clk})
	dir := t.TempDir()
	_, path := running(t, fake, dir, "app")
	var atReopen [][]string
	rt := &reopenWatcher{Runtime: fake}
	rt.onReopen = func() { atReopen = append(atReopen, files(t, path)) }
	m, err := New(Options{Runtime: rt, MaxSize: 1024, MaxFiles: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		write(t, path, 2048, 'x')
		if err := m.SyncOnce(ctx); err != nil {
			t.Fatalf("rotation %d: %v", i+1, err)
		}
		clk.Step(time.Second)
	}
	first := "." + t0.Format(TimestampFormat)
	second := "." + t0.Add(time.Second).Format(TimestampFormat)
	if want := [][]string{{first}, {first, second}}; len(atReopen) != 2 || !slices.Equal(atReopen[0], want[0]) || !slices.Equal(atReopen[1], want[1]) {
		t.Errorf("rotated files at each reopen %q; want %q (the older one not yet compressed)", atReopen, want)
	}
	if got, want := files(t, path), []string{first + ".gz", second}; !slices.Equal(got, want) {
		t.Errorf("rotated files after %q; want %q", got, want)
	}
}

// A container removed between the list and its status is skipped, not an
// error.
func TestContainerGoneIsSkipped(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	fake := runtimetest.New(runtimetest.Options{Clock: clk})
	dir := t.TempDir()
	id, path := running(t, fake, dir, "app")
	write(t, path, 2048, 'x')
	m, err := New(Options{Runtime: &reopenWatcher{Runtime: fake, gone: id}, MaxSize: 1024, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncOnce(context.Background()); err != nil {
		t.Errorf("SyncOnce: %v; want nil for a container that is gone", err)
	}
}

// A container's log path is asked of the runtime once while it runs, and
// forgotten once it no longer does.
func TestLogPathAskedOnce(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	rt := runtimetest.New(runtimetest.Options{Clock: clk})
	dir := t.TempDir()
	first, firstPath := running(t, rt, dir, "first")
	m, err := New(Options{Runtime: rt, MaxSize: 1024, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := m.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := rt.CallCount("ContainerStatus"); n != 1 {
		t.Errorf("ContainerStatus called %d times in three looks, want once", n)
	}
	// The path kept is the one rotated.
	write(t, firstPath, 2048, 'x')
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := files(t, firstPath); len(got) != 1 {
		t.Errorf("rotated files %v, want one", got)
	}

	rt.ResetCalls()
	if err := rt.Exit(first, 0); err != nil {
		t.Fatal(err)
	}
	second, _ := running(t, rt, dir, "second")
	if err := m.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var asked []string
	for _, c := range rt.Calls() {
		if c.Method == "ContainerStatus" {
			asked = append(asked, c.ID)
		}
	}
	if !slices.Equal(asked, []string{second}) {
		t.Errorf("ContainerStatus asked for %v, want the new container %s alone", asked, second)
	}
	if _, kept := m.paths[first]; kept || len(m.paths) != 1 {
		t.Errorf("paths kept %v, want the running container's alone", m.paths)
	}
}
