package podsync

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
)

// stateRelister answers relists with what its syncer made run.
type stateRelister struct {
	mu  sync.Mutex
	st  map[types.UID]*PodState
	got int // per-pod relists
}

func (r *stateRelister) Relist(context.Context) (map[types.UID]*PodState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[types.UID]*PodState{}
	for k, v := range r.st {
		out[k] = v
	}
	return out, nil
}

func (r *stateRelister) RelistPod(_ context.Context, uid types.UID) (*PodState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got++
	return r.st[uid], nil
}

// A pod whose sync changed what runs is not synced again before an
// observation shows the change, however soon it is due again (the kubelet's
// pod worker waits for a status newer than its last sync): else it would
// create a second sandbox of the same attempt.
func TestNoSyncOnAStaleObservation(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(t0)
	pod := testPod(corev1.RestartPolicyAlways, "a")
	r := &stateRelister{st: map[types.UID]*PodState{}}
	var mu sync.Mutex
	var seen []int // sandboxes each sync saw
	syncer := SyncerFuncs{Sync: func(_ context.Context, p *corev1.Pod, st *PodState) (SyncResult, error) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		if st != nil {
			n = len(st.Sandboxes)
		}
		seen = append(seen, n)
		r.mu.Lock()
		r.st[p.UID] = &PodState{UID: p.UID, Sandboxes: []*SandboxState{{ID: "sb", HostNetwork: true}}}
		r.mu.Unlock()
		return SyncResult{Changed: true}, nil
	}}
	eng, err := New(Options{Syncer: syncer, Relister: r, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// Due again before the step that would relist it: dispatched at once.
	eng.Trigger(pod.UID)
	eng.takeTriggers()
	var wg sync.WaitGroup
	eng.dispatch(ctx, &wg)
	wg.Wait()
	mu.Lock()
	if len(seen) != 1 {
		t.Errorf("syncs saw %v sandboxes: a second sync ran on the observation before the first", seen)
	}
	mu.Unlock()
	// The next step observes, then syncs on what the first sync made.
	if _, err := eng.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[1] != 1 {
		t.Errorf("syncs saw %v sandboxes, want [0 1]", seen)
	}
}
