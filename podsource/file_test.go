package podsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

func manifest(name, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers:\n  - name: app\n    image: " + image + "\n"
}

// writeAtomic writes a dot-file and renames it into place, as careful tools do.
func writeAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func uidOf(t *testing.T, path, data string) string {
	t.Helper()
	pod, err := DecodeManifest([]byte(data), Origin{Source: FileSource, Location: path, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return string(pod.UID)
}

type fileRig struct {
	t     *testing.T
	dir   string
	clock *clocktesting.FakeClock
	rec   *record.FakeRecorder
	src   *File
	m     *Merger
	ch    <-chan Update
}

func startFile(t *testing.T, path string) *fileRig {
	t.Helper()
	r := &fileRig{t: t, clock: clocktesting.NewFakeClock(seenTime), rec: record.NewFakeRecorder(1000)}
	src, err := NewFile(FileOptions{Path: path, NodeName: "n1", Clock: r.clock, Recorder: r.rec})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMerger(MergerOptions{Sources: []PodSource{src}, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	r.src, r.m, r.ch = src, m, m.Updates()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// waitEvent waits for an event containing all the given strings, skipping others.
func (r *fileRig) waitEvent(subs ...string) string {
	r.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case ev := <-r.rec.Events:
			if containsAll(ev, subs) {
				return ev
			}
		case <-deadline:
			r.t.Fatalf("no event with %q within %v", subs, waitTimeout)
		}
	}
}

// settledEvent waits for an event containing all the given strings, stepping
// the clock by SettleDelay meanwhile: a manifest that an inotify event found
// invalid is reported only once it stayed so.
func (r *fileRig) settledEvent(subs ...string) string {
	r.t.Helper()
	var got string
	testenv.Eventually(r.t, waitTimeout, 5*time.Millisecond, fmt.Sprintf("event with %q", subs), func() bool {
		for {
			select {
			case ev := <-r.rec.Events:
				if containsAll(ev, subs) {
					got = ev
					return true
				}
			default:
				r.clock.Step(SettleDelay)
				return false
			}
		}
	})
	return got
}

func TestFileSourceDirectory(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	dir := t.TempDir()
	// Present before start: one valid, one dot-file, one directory.
	a := filepath.Join(dir, "a.yaml")
	writeAtomic(t, a, manifest("a", "a:1"))
	if err := os.WriteFile(filepath.Join(dir, ".hidden.yaml"), []byte(manifest("hidden", "h:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "s.yaml"), []byte(manifest("s", "s:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startFile(t, dir)
	uidA := uidOf(t, a, manifest("a", "a:1"))
	expectUpdate(t, r.ch, "ADD file [a-n1/"+uidA+"]")

	// Create (in place, JSON).
	b := filepath.Join(dir, "b.json")
	bJSON := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"app","image":"b:1"}]}}`
	if err := os.WriteFile(b, []byte(bJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	uidB := uidOf(t, b, bJSON)
	expectUpdate(t, r.ch, "ADD file [b-n1/"+uidB+"]")

	// Rename into place.
	c := filepath.Join(dir, "c.yaml")
	writeAtomic(t, c, manifest("c", "c:1"))
	uidC := uidOf(t, c, manifest("c", "c:1"))
	expectUpdate(t, r.ch, "ADD file [c-n1/"+uidC+"]")

	// Edit in place: the old pod goes, the new one comes.
	if err := os.WriteFile(a, []byte(manifest("a", "a:2")), 0o644); err != nil {
		t.Fatal(err)
	}
	uidA2 := uidOf(t, a, manifest("a", "a:2"))
	expectUpdate(t, r.ch, "REMOVE file [a-n1/"+uidA+"]")
	expectUpdate(t, r.ch, "ADD file [a-n1/"+uidA2+"]")

	// The same content rewritten: nothing. A dot-file: nothing. Proven by
	// the next change being the only update.
	writeAtomic(t, a, manifest("a", "a:2"))
	if err := os.WriteFile(filepath.Join(dir, ".other.yaml"), []byte(manifest("o", "o:1")), 0o644); err != nil {
		t.Fatal(err)
	}

	// Delete.
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	expectUpdate(t, r.ch, "REMOVE file [b-n1/"+uidB+"]")

	// A broken edit keeps the last valid pod and reports the error.
	writeAtomic(t, c, manifest("c", "c:2")+"  - name: app\n    image: x\n")
	ev := r.settledEvent("Warning InvalidManifest", c, `spec.containers[1].name: Duplicate value: "app"`, "keeping the pod from its last valid version")
	t.Logf("event: %s", ev)
	if err := r.src.Errors()[c]; err == nil || !strings.Contains(err.Error(), "podsource: file "+c+": ") {
		t.Errorf("Errors()[%s] = %v", c, err)
	}
	// Re-lists keep reporting it; the pod stays.
	r.clock.Step(DefaultPeriod)
	r.waitEvent("Warning InvalidManifest", c)
	if got := len(r.m.Pods()); got != 2 {
		t.Errorf("%d pods after a broken edit, want 2", got)
	}
	// A half-written file (truncated YAML) is the same case.
	writeAtomic(t, c, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: c\nspec:\n  containers:\n  - name: app\n    image: [")
	r.settledEvent("Warning InvalidManifest", c, "not YAML or JSON")

	// Repaired with the old content: the pod was never lost, so nothing.
	writeAtomic(t, c, manifest("c", "c:1"))
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "error cleared after repair", func() bool { return r.src.Errors()[c] == nil })
	noUpdate(t, r.ch)
	// Repaired with new content: the usual replace.
	writeAtomic(t, c, manifest("c", "c:3"))
	uidC3 := uidOf(t, c, manifest("c", "c:3"))
	expectUpdate(t, r.ch, "REMOVE file [c-n1/"+uidC+"]")
	expectUpdate(t, r.ch, "ADD file [c-n1/"+uidC3+"]")

	// A broken edit of a deleted-then-recreated file has nothing to keep.
	writeAtomic(t, filepath.Join(dir, "d.yaml"), "kind: Pod\n")
	r.settledEvent("Warning InvalidManifest", "d.yaml", "apiVersion")
	noUpdate(t, r.ch)
}

func TestFileSourceRelistFindsWhatInotifyCannot(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	// The parent directory does not exist yet: nothing can be watched, so only
	// the periodic re-list sees the file appear.
	parent := filepath.Join(t.TempDir(), "manifests")
	path := filepath.Join(parent, "web.yaml")
	r := startFile(t, path)
	expectUpdate(t, r.ch, "ADD file []")

	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, path, webYAML)
	noUpdate(t, r.ch)
	r.clock.Step(DefaultPeriod)
	uid := uidOf(t, path, webYAML)
	expectUpdate(t, r.ch, "ADD file [web-n1/"+uid+"]")

	// From now on the parent is watched: a single file replaced by rename is
	// seen at once, without a tick.
	edited := strings.Replace(webYAML, "1.27", "1.28", 1)
	writeAtomic(t, path, edited)
	expectUpdate(t, r.ch, "REMOVE file [web-n1/"+uid+"]")
	expectUpdate(t, r.ch, "ADD file [web-n1/"+uidOf(t, path, edited)+"]")

	// Other files beside the single manifest are not ours.
	writeAtomic(t, filepath.Join(parent, "other.yaml"), manifest("other", "o:1"))
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	expectUpdate(t, r.ch, "REMOVE file [web-n1/"+uidOf(t, path, edited)+"]")
}

func TestFileSourceDirectoryRemovedAndRecreated(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(dir, "a.yaml")
	writeAtomic(t, a, manifest("a", "a:1"))
	r := startFile(t, dir)
	uid := uidOf(t, a, manifest("a", "a:1"))
	expectUpdate(t, r.ch, "ADD file [a-n1/"+uid+"]")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	expectUpdate(t, r.ch, "REMOVE file [a-n1/"+uid+"]")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, a, manifest("a", "a:1"))
	// The new directory is watched from its creation (seen through the parent)
	// or, at the latest, from the next re-list.
	var got *Update
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "recreated directory listed", func() bool {
		select {
		case u := <-r.ch:
			got = &u
			return true
		default:
			r.clock.Step(DefaultPeriod)
			return false
		}
	})
	if d := describe(*got); d != "ADD file [a-n1/"+uid+"]" {
		t.Fatalf("update %s", d)
	}
}

func TestFileSourceSyncOnce(t *testing.T) {
	dir := t.TempDir()
	src, err := NewFile(FileOptions{Path: dir, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(dir, "a.yaml"), manifest("a", "a:1"))
	writeAtomic(t, filepath.Join(dir, "b.yaml"), "nonsense: [")
	if pods := src.Pods(); pods != nil {
		t.Fatalf("Pods before the first SyncOnce: %v", pods)
	}
	if err := src.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	pods := src.Pods()
	if len(pods) != 1 || pods[0].Name != "a-n1" {
		t.Errorf("pods %v", pods)
	}
	if errs := src.Errors(); len(errs) != 1 || errs[filepath.Join(dir, "b.yaml")] == nil {
		t.Errorf("errors %v", errs)
	}
}

func TestFileOptions(t *testing.T) {
	for _, tc := range []struct {
		opts FileOptions
		want string
	}{
		{FileOptions{NodeName: "n"}, "FileOptions.Path"},
		{FileOptions{Path: "/x"}, "FileOptions.NodeName"},
		{FileOptions{Path: "/x", NodeName: "N_1"}, "FileOptions.NodeName"},
		{FileOptions{Path: "/x", NodeName: "n", Period: 10}, "FileOptions.Period"},
	} {
		if _, err := NewFile(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// errSeen reports whether the source has read path and found it unusable.
func (r *fileRig) errSeen(path string) bool {
	r.src.mu.Lock()
	defer r.src.mu.Unlock()
	e := r.src.entries[path]
	return e != nil && e.err != nil
}

// An editor's plain write (truncate, then write) is an edit, not a broken
// manifest: the empty file read in between is not reported, and the pod is
// replaced by the new version.
func TestFileSourceTruncateThenWrite(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	writeAtomic(t, a, manifest("a", "a:1"))
	r := startFile(t, dir)
	uid1 := uidOf(t, a, manifest("a", "a:1"))
	expectUpdate(t, r.ch, "ADD file [a-n1/"+uid1+"]")

	fh, err := os.OpenFile(a, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Make sure the source read the file at its empty moment.
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "empty file read", func() bool { return r.errSeen(a) })
	if _, err := fh.WriteString(manifest("a", "a:2")); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	uid2 := uidOf(t, a, manifest("a", "a:2"))
	expectUpdate(t, r.ch, "REMOVE file [a-n1/"+uid1+"]")
	expectUpdate(t, r.ch, "ADD file [a-n1/"+uid2+"]")
	r.clock.Step(SettleDelay)
	select {
	case ev := <-r.rec.Events:
		t.Errorf("event %q for an ordinary edit", ev)
	default:
	}
	if errs := r.src.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %v after an ordinary edit", errs)
	}

	// A file that stays empty is reported once SettleDelay has passed, and
	// the pod from its last valid version is kept.
	if err := os.Truncate(a, 0); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "empty file read", func() bool { return r.errSeen(a) })
	select {
	case ev := <-r.rec.Events:
		t.Fatalf("event %q before SettleDelay", ev)
	default:
	}
	r.settledEvent("Warning InvalidManifest", a, "empty manifest", "keeping the pod from its last valid version")
	if err := r.src.Errors()[a]; err == nil || !strings.Contains(err.Error(), "empty manifest") {
		t.Errorf("Errors()[a] = %v", err)
	}
	if pods := r.m.Pods(); len(pods) != 1 || pods[0].UID != types.UID(uid2) {
		t.Errorf("pods %v, want the last valid one", pods)
	}
	noUpdate(t, r.ch)
}

// Of two files declaring the same pod, the one whose name sorts last is
// used, as kubelet's file source does; the other is reported.
func TestFileSourceDuplicateNames(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeAtomic(t, a, manifest("web", "web:a"))
	writeAtomic(t, b, manifest("web", "web:b"))
	uidA, uidB := uidOf(t, a, manifest("web", "web:a")), uidOf(t, b, manifest("web", "web:b"))
	r := startFile(t, dir)
	expectUpdate(t, r.ch, "ADD file [web-n1/"+uidB+"]")
	err := r.src.Errors()[a]
	if err == nil || !strings.Contains(err.Error(), "podsource: file "+a+": pod default/web-n1 is declared by "+b+" too") {
		t.Errorf("Errors()[a] = %v", err)
	}
	// Once b goes, a's pod is used.
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	expectUpdate(t, r.ch, "REMOVE file [web-n1/"+uidB+"]")
	expectUpdate(t, r.ch, "ADD file [web-n1/"+uidA+"]")
	if errs := r.src.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %v", errs)
	}
}

// Entries that are not regular files are skipped, never opened (a FIFO
// would block), and reported.
func TestFileSourceSkipsWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "a.yaml"), manifest("a", "a:1"))
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	src, err := NewFile(FileOptions{Path: dir, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.SyncOnce(context.Background()); err != nil || len(src.Pods()) != 1 {
		t.Fatalf("SyncOnce: %v, pods %v", err, src.Pods())
	}
	errs := src.Errors()
	if err := errs[fifo]; err == nil || !strings.Contains(err.Error(), "podsource: file "+fifo+": skipped: a named pipe (FIFO), not a regular file") {
		t.Errorf("Errors()[fifo] = %v", err)
	}
	if err := errs[link]; err == nil || !strings.Contains(err.Error(), "skipped: a directory (not recursed into)") {
		t.Errorf("Errors()[link] = %v", err)
	}
	// Gone, forgotten.
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := src.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := src.Errors()[fifo]; ok {
		t.Errorf("fifo still reported after removal")
	}
}

// Run keeps the watch that SyncOnce, its step, reads: a second Run of the
// same source fails, and once the first ends the source can run again.
func TestFileSourceOneRunAtATime(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "a.yaml"), manifest("a", "a:1"))
	src, err := NewFile(FileOptions{Path: dir, NodeName: "n1", Clock: clocktesting.NewFakeClock(seenTime)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		updates := make(chan Update, 1)
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, updates) }()
		if u := nextUpdate(t, updates); len(u.Pods) != 1 {
			t.Fatalf("first update %s", describe(u))
		}
		if err := src.Run(ctx, updates); err == nil || !strings.Contains(err.Error(), "already running") {
			t.Fatalf("second Run: %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}
