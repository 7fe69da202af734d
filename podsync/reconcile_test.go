package podsync

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
)

// A change of a pod's status alone in its source (a RECONCILE, such as the
// API's copy of a status the node wrote) replaces the engine's copy of the
// pod without syncing it, as the kubelet's pod manager takes it; the next
// sync sees the new copy. A pod with readiness gates is synced at once.
// A status writer that keeps the API's status is handed the new copy.
func TestReconcileDoesNotSync(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(t0)
	var mu sync.Mutex
	synced := map[types.UID][]*corev1.Pod{}
	syncer := SyncerFuncs{Sync: func(_ context.Context, pod *corev1.Pod, _ *PodState) (SyncResult, error) {
		mu.Lock()
		defer mu.Unlock()
		synced[pod.UID] = append(synced[pod.UID], pod)
		return SyncResult{}, nil
	}}
	relister := relisterFunc(func(context.Context) (map[types.UID]*PodState, error) { return nil, nil })
	writer := &seeingWriter{}
	eng, err := New(Options{Syncer: syncer, Relister: relister, Clock: clock, Writer: writer})
	if err != nil {
		t.Fatal(err)
	}
	count := func(uid types.UID) ([]*corev1.Pod, int) {
		mu.Lock()
		defer mu.Unlock()
		return synced[uid], len(synced[uid])
	}
	pod := func(uid string, gates bool, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			Status: corev1.PodStatus{Phase: phase}}
		if gates {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
		}
		return p
	}
	plain, gated := pod("plain", false, corev1.PodPending), pod("gated", true, corev1.PodPending)
	eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{plain, gated}})
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{"plain", "gated"} {
		if _, n := count(uid); n != 1 {
			t.Fatalf("%s pod synced %d times after its ADD, want 1", uid, n)
		}
	}

	plain2, gated2 := pod("plain", false, corev1.PodRunning), pod("gated", true, corev1.PodRunning)
	eng.HandleUpdate(podsource.Update{Op: podsource.OpReconcile, Source: podsource.APISource, Pods: []*corev1.Pod{plain2, gated2}})
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, n := count("plain"); n != 1 {
		t.Errorf("plain pod synced %d times after a RECONCILE, want still 1", n)
	}
	if pods, n := count("gated"); n != 2 || pods[1] != gated2 {
		t.Errorf("gated pod synced %d times after a RECONCILE, want 2 with the new copy", n)
	}
	writer.mu.Lock()
	if len(writer.seen) != 1 || writer.seen[0] != plain2 {
		t.Errorf("writer was handed %v, want the plain pod's new copy alone", writer.seen)
	}
	writer.mu.Unlock()

	// The next sync of the plain pod (its resync) works on the new copy.
	clock.Step(2 * DefaultResyncPeriod)
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if pods, n := count("plain"); n != 2 || pods[1] != plain2 {
		t.Errorf("plain pod's resync: %d syncs, want 2 with the RECONCILE's copy", n)
	}
}

// seeingWriter is a recordingWriter that also takes the API's copies.
type seeingWriter struct {
	recordingWriter
	seen []*corev1.Pod
}

func (w *seeingWriter) SeeAPIPod(pod *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, pod)
}

// Once the API's copy of a pod shows the status the engine last published
// (a RECONCILE), the engine holds that copy's status instead of its own, and
// keeps holding it through a resync that publishes the same; a copy that
// differs leaves the engine's own.
func TestEngineHoldsTheAPIStatus(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(t0.Add(1500 * time.Millisecond))
	syncer := SyncerFuncs{Sync: func(context.Context, *corev1.Pod, *PodState) (SyncResult, error) { return SyncResult{}, nil }}
	relister := relisterFunc(func(context.Context) (map[types.UID]*PodState, error) { return nil, nil })
	writer := &recordingWriter{}
	eng, err := New(Options{Syncer: syncer, Relister: relister, Clock: clock, Writer: writer, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{pod}})
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	published := writer.last(pod.UID)
	if published.StartTime == nil || published.StartTime.Time != t0.Add(time.Second) {
		t.Errorf("start time %v, want %v (whole seconds)", published.StartTime, t0.Add(time.Second))
	}
	held := func() *corev1.PodStatus {
		eng.mu.Lock()
		defer eng.mu.Unlock()
		return eng.workers[pod.UID].status
	}

	api := pod.DeepCopy()
	api.Status = *published.DeepCopy()
	eng.HandleUpdate(podsource.Update{Op: podsource.OpReconcile, Source: podsource.APISource, Pods: []*corev1.Pod{api}})
	if held() != &api.Status {
		t.Errorf("after the API's copy of the published status, the engine holds its own")
	}
	clock.Step(DefaultResyncPeriod)
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(writer.statuses[pod.UID]); n != 1 {
		t.Errorf("%d statuses published, want the first alone", n)
	}
	if held() != &api.Status {
		t.Errorf("after a resync publishing the same status, the engine holds its own")
	}

	other := api.DeepCopy()
	other.Status.Message = "another writer's"
	eng.HandleUpdate(podsource.Update{Op: podsource.OpReconcile, Source: podsource.APISource, Pods: []*corev1.Pod{other}})
	if held() == &other.Status {
		t.Errorf("the engine holds an API status that differs from what it published")
	}

	// A new engine (a restarted node) whose first status for a pod is the
	// one the API shows holds the API's from the start.
	eng2, err := New(Options{Syncer: syncer, Relister: relister, Clock: clock, Writer: &recordingWriter{}, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	again := api.DeepCopy()
	eng2.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{again}})
	if _, err := eng2.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	eng2.mu.Lock()
	if eng2.workers[pod.UID].status != &again.Status {
		t.Errorf("a restarted engine holds its own copy of the status the API shows")
	}
	eng2.mu.Unlock()
}
