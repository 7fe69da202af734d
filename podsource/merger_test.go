package podsource

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

var seenTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func newTestMerger(t *testing.T, rec record.EventRecorder, names ...string) *Merger {
	t.Helper()
	var srcs []PodSource
	for _, n := range names {
		srcs = append(srcs, SourceFunc(n, nil))
	}
	m, err := NewMerger(MergerOptions{Sources: srcs, Recorder: rec, Clock: clocktesting.NewFakePassiveClock(seenTime)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func set(t *testing.T, m *Merger, source string, pods ...*v1.Pod) {
	t.Helper()
	if pods == nil {
		pods = []*v1.Pod{}
	}
	if err := m.Merge(context.Background(), Update{Op: OpSet, Source: source, Pods: pods}); err != nil {
		t.Fatal(err)
	}
}

func TestMergerOps(t *testing.T) {
	m := newTestMerger(t, nil, "api", "file")
	ch := m.Updates()

	a, b := testPod("a", "uid-a"), testPod("b", "uid-b")
	set(t, m, "api", a, b)
	add := expectUpdate(t, ch, "ADD api [a/uid-a b/uid-b]")
	if got := add.Pods[0].Annotations[ConfigSourceAnnotation]; got != "api" {
		t.Errorf("config.source %q", got)
	}
	if got := add.Pods[0].Annotations[ConfigSeenAnnotation]; got != seenTime.Format(time.RFC3339Nano) {
		t.Errorf("config.seen %q", got)
	}
	if a.Annotations != nil {
		t.Errorf("the merger modified the pod it was sent")
	}
	if m.SeenAllSources() {
		t.Errorf("SeenAllSources before file sent anything")
	}

	// The same set again: nothing.
	set(t, m, "api", a.DeepCopy(), b.DeepCopy())
	noUpdate(t, ch)

	// First set of another source, empty: an empty ADD, and all seen.
	set(t, m, "file")
	expectUpdate(t, ch, "ADD file []")
	if !m.SeenAllSources() {
		t.Errorf("not SeenAllSources after both sent")
	}
	select {
	case <-m.SeenAllSourcesC():
	default:
		t.Errorf("SeenAllSourcesC not closed")
	}

	// Spec change: UPDATE, keeping config.seen.
	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "app:2"
	set(t, m, "api", a2, b)
	u := expectUpdate(t, ch, "UPDATE api [a/uid-a]")
	if u.Pods[0].Spec.Containers[0].Image != "app:2" || u.Pods[0].Annotations[ConfigSeenAnnotation] == "" {
		t.Errorf("update pod %+v", u.Pods[0])
	}

	// Labels, non-local annotations: UPDATE; local annotations: nothing.
	a3 := a2.DeepCopy()
	a3.Labels = map[string]string{"x": "y"}
	set(t, m, "api", a3, b)
	expectUpdate(t, ch, "UPDATE api [a/uid-a]")
	a4 := a3.DeepCopy()
	a4.Annotations = map[string]string{"team": "blue"}
	set(t, m, "api", a4, b)
	expectUpdate(t, ch, "UPDATE api [a/uid-a]")
	a5 := a4.DeepCopy()
	a5.Annotations[ConfigSeenAnnotation] = "yesterday"
	a5.Annotations[ConfigMirrorAnnotation] = "x"
	set(t, m, "api", a5, b)
	noUpdate(t, ch)

	// Status only: RECONCILE.
	a6 := a4.DeepCopy()
	a6.Status.Phase = v1.PodRunning
	set(t, m, "api", a6, b)
	u = expectUpdate(t, ch, "RECONCILE api [a/uid-a]")
	if u.Pods[0].Status.Phase != v1.PodRunning {
		t.Errorf("reconcile phase %q", u.Pods[0].Status.Phase)
	}

	// Graceful deletion: DELETE.
	b2 := b.DeepCopy()
	now := metav1.NewTime(seenTime)
	grace := int64(30)
	b2.DeletionTimestamp, b2.DeletionGracePeriodSeconds = &now, &grace
	set(t, m, "api", a6, b2)
	expectUpdate(t, ch, "DELETE api [b/uid-b]")

	// Gone: REMOVE. New: ADD. In kubelet's order, REMOVE first.
	set(t, m, "api", a6, testPod("c", "uid-c"))
	expectUpdate(t, ch, "REMOVE api [b/uid-b]")
	expectUpdate(t, ch, "ADD api [c/uid-c]")
	noUpdate(t, ch)

	if got := len(m.Pods()); got != 2 {
		t.Errorf("Pods() has %d pods, want 2", got)
	}
	if got := len(m.Pods("file")); got != 0 {
		t.Errorf("Pods(file) has %d pods", got)
	}
}

func TestMergerOrderInOneSet(t *testing.T) {
	m := newTestMerger(t, nil, "api")
	ch := m.Updates()
	a, b, c, d := testPod("a", "1"), testPod("b", "2"), testPod("c", "3"), testPod("d", "4")
	set(t, m, "api", a, b, c)
	expectUpdate(t, ch, "ADD api [a/1 b/2 c/3]")
	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "x"
	b2 := b.DeepCopy()
	now := metav1.NewTime(seenTime)
	b2.DeletionTimestamp = &now
	c2 := c.DeepCopy()
	c2.Status.Message = "hi"
	// d new, a updated, b deleting, c reconciled, and nothing removed... then a removal.
	set(t, m, "api", d, a2, b2, c2)
	expectUpdate(t, ch, "ADD api [d/4]")
	expectUpdate(t, ch, "UPDATE api [a/1]")
	expectUpdate(t, ch, "DELETE api [b/2]")
	expectUpdate(t, ch, "RECONCILE api [c/3]")
	noUpdate(t, ch)
}

func TestMergerEditedStaticPod(t *testing.T) {
	m := newTestMerger(t, nil, "file")
	ch := m.Updates()
	o := Origin{Source: FileSource, Location: "/m/web.yaml", NodeName: "n1"}
	old, err := DecodeManifest([]byte(webYAML), o)
	if err != nil {
		t.Fatal(err)
	}
	set(t, m, "file", old)
	expectUpdate(t, ch, "ADD file [web-n1/"+string(old.UID)+"]")

	// Rewritten with the same content: nothing.
	same, _ := DecodeManifest([]byte("# touched\n"+webYAML), o)
	set(t, m, "file", same)
	noUpdate(t, ch)

	// Edited: REMOVE old, ADD new.
	edited, _ := DecodeManifest([]byte(strings.Replace(webYAML, "1.27", "1.28", 1)), o)
	set(t, m, "file", edited)
	expectUpdate(t, ch, "REMOVE file [web-n1/"+string(old.UID)+"]")
	expectUpdate(t, ch, "ADD file [web-n1/"+string(edited.UID)+"]")
}

func TestMergerDuplicateNames(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	m := newTestMerger(t, rec, "api", "file")
	ch := m.Updates()

	// Within one source the first wins.
	set(t, m, "file", testPod("web", "f1"), testPod("web", "f2"))
	expectUpdate(t, ch, "ADD file [web/f1]")
	ev := <-rec.Events
	if !strings.Contains(ev, "Warning FailedValidation") || !strings.Contains(ev, `duplicate pod name "web"`) {
		t.Errorf("event %q", ev)
	}

	// Across sources the holder keeps the name.
	set(t, m, "api", testPod("web", "a1"), testPod("other", "a2"))
	expectUpdate(t, ch, "ADD api [other/a2]")
	ev = <-rec.Events
	if !strings.Contains(ev, `source "file" already has a pod with that name`) {
		t.Errorf("event %q", ev)
	}
	// Sent again: no new event.
	set(t, m, "api", testPod("web", "a1"), testPod("other", "a2"))
	noUpdate(t, ch)
	if len(rec.Events) != 0 {
		t.Errorf("repeated event %q", <-rec.Events)
	}

	// Mirror pods share their static pod's name by design.
	mirror := testPod("web", "a3")
	mirror.Annotations = map[string]string{ConfigMirrorAnnotation: "f1"}
	set(t, m, "api", testPod("web", "a1"), testPod("other", "a2"), mirror)
	expectUpdate(t, ch, "ADD api [web/a3]")

	// When the file source lets the name go, the api pod gets it.
	set(t, m, "file")
	expectUpdate(t, ch, "REMOVE file [web/f1]")
	expectUpdate(t, ch, "ADD api [web/a1]")
	noUpdate(t, ch)
}

func TestMergerErrors(t *testing.T) {
	m := newTestMerger(t, nil, "api")
	err := m.Merge(context.Background(), Update{Op: OpSet, Source: "nope"})
	if !errors.Is(err, ErrUnknownSource) {
		t.Errorf("unknown source: %v", err)
	}
	if err := m.Merge(context.Background(), Update{Op: OpAdd, Source: "api"}); err == nil {
		t.Errorf("ADD from a source accepted")
	}
	for _, opts := range []MergerOptions{
		{},
		{Sources: []PodSource{nil}},
		{Sources: []PodSource{SourceFunc("", nil)}},
		{Sources: []PodSource{SourceFunc("a", nil), SourceFunc("a", nil)}},
		{Sources: []PodSource{SourceFunc("a", nil)}, Buffer: ptr(-1)},
	} {
		if _, err := NewMerger(opts); err == nil || !strings.Contains(err.Error(), "MergerOptions.") {
			t.Errorf("options %+v: error %v", opts, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestMergerMergeBlocksUntilContextEnds(t *testing.T) {
	m, err := NewMerger(MergerOptions{Sources: []PodSource{SourceFunc("api", nil)}, Buffer: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = m.Merge(ctx, Update{Op: OpSet, Source: "api", Pods: []*v1.Pod{testPod("a", "1")}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Merge on a full channel with an ended context: %v", err)
	}
}

func TestMergerRun(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after the cleanups registered below
	ctx, cancel := context.WithCancel(context.Background())
	src := SourceFunc("api", func(ctx context.Context, updates chan<- Update) error {
		if err := send(ctx, updates, Update{Op: OpSet, Pods: []*v1.Pod{testPod("a", "1")}}); err != nil {
			return nil
		}
		<-ctx.Done()
		return nil
	})
	m, err := NewMerger(MergerOptions{Sources: []PodSource{src}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	expectUpdate(t, m.Updates(), "ADD api [a/1]")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}

	// A failing source ends Run with its error.
	failing := SourceFunc("file", func(context.Context, chan<- Update) error { return errors.New("broken") })
	m, _ = NewMerger(MergerOptions{Sources: []PodSource{failing, SourceFunc("api", nil)}})
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `source "file": broken`) {
		t.Errorf("Run with a failing source: %v", err)
	}
}

// A source whose pods carry the local annotations the merger holds has
// them stored and sent as they are; one whose pods do not gets copies, and
// its pods are not modified.
func TestMergerSendsStampedPodsAsTheyAre(t *testing.T) {
	m := newTestMerger(t, nil, "api")
	ch := m.Updates()
	stamp := func(p *v1.Pod, seen string) *v1.Pod {
		p.Annotations = map[string]string{ConfigSourceAnnotation: "api", ConfigSeenAnnotation: seen}
		return p
	}
	a := stamp(testPod("a", "uid-a"), "earlier")
	b := testPod("b", "uid-b")
	set(t, m, "api", a, b)
	add := expectUpdate(t, ch, "ADD api [a/uid-a b/uid-b]")
	if add.Pods[0] != a {
		t.Errorf("a stamped pod was copied on ADD")
	}
	if add.Pods[1] == b || b.Annotations != nil {
		t.Errorf("an unstamped pod was sent as it is, or modified")
	}

	// Status only: RECONCILE with the source's pod itself.
	a2 := stamp(a.DeepCopy(), "earlier")
	a2.Status.Phase = v1.PodRunning
	set(t, m, "api", a2, b)
	if u := expectUpdate(t, ch, "RECONCILE api [a/uid-a]"); u.Pods[0] != a2 {
		t.Errorf("a stamped pod was copied on RECONCILE")
	}
	// Spec: UPDATE with it too.
	a3 := stamp(a2.DeepCopy(), "earlier")
	a3.Spec.Containers[0].Image = "app:2"
	set(t, m, "api", a3, b)
	if u := expectUpdate(t, ch, "UPDATE api [a/uid-a]"); u.Pods[0] != a3 {
		t.Errorf("a stamped pod was copied on UPDATE")
	}
	// A stamp that disagrees with what the merger holds (another seen
	// time) is not taken: a copy with the held one.
	a4 := stamp(a3.DeepCopy(), "later")
	a4.Status.Phase = v1.PodSucceeded
	set(t, m, "api", a4, b)
	u := expectUpdate(t, ch, "RECONCILE api [a/uid-a]")
	if u.Pods[0] == a4 || u.Pods[0].Annotations[ConfigSeenAnnotation] != "earlier" || a4.Annotations[ConfigSeenAnnotation] != "later" {
		t.Errorf("reconciled %p (sent %p) with config.seen %q; the source's pod now says %q",
			u.Pods[0], a4, u.Pods[0].Annotations[ConfigSeenAnnotation], a4.Annotations[ConfigSeenAnnotation])
	}
	// Another source's name is not taken either.
	c := testPod("c", "uid-c")
	c.Annotations = map[string]string{ConfigSourceAnnotation: "file", ConfigSeenAnnotation: "earlier"}
	set(t, m, "api", a4, b, c)
	if add := expectUpdate(t, ch, "ADD api [c/uid-c]"); add.Pods[0] == c || add.Pods[0].Annotations[ConfigSourceAnnotation] != "api" {
		t.Errorf("a pod stamped with another source was sent as it is")
	}
}
