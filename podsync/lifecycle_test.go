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

// calls records what a SyncerFuncs backend was asked, in order.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

func (c *calls) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

func TestLifecycleLatestWinsAndCancel(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(t0)
	var rec calls
	var eng *Engine
	pod := testPod(corev1.RestartPolicyAlways, "a")
	syncer := SyncerFuncs{
		Sync: func(ctx context.Context, p *corev1.Pod, _ *PodState) (SyncResult, error) {
			rec.add("sync " + p.Spec.Containers[0].Image)
			if p.Spec.Containers[0].Image == "block" {
				// The pod is deleted while this sync runs: it is cancelled.
				del := p.DeepCopy()
				now := metav1.NewTime(clock.Now())
				g := int64(7)
				del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &now, &g
				eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: []*corev1.Pod{del}})
				<-ctx.Done()
				rec.add("cancelled")
				return SyncResult{}, ctx.Err()
			}
			return SyncResult{}, nil
		},
		Terminating: func(_ context.Context, _ *corev1.Pod, _ *PodState, grace time.Duration) error {
			rec.add("terminating " + grace.String())
			return nil
		},
		Terminated: func(context.Context, *corev1.Pod, *PodState) error {
			rec.add("terminated")
			return nil
		},
	}
	rl := relisterFunc(func(context.Context) (map[types.UID]*PodState, error) { return nil, nil })
	w := &recordingWriter{}
	var err error
	if eng, err = New(Options{Syncer: syncer, Relister: rl, Clock: clock, Writer: w}); err != nil {
		t.Fatal(err)
	}
	step := func() {
		if _, err := eng.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Three updates before a step: only the latest is synced.
	for _, img := range []string{"v1", "v2", "v3"} {
		p := pod.DeepCopy()
		p.Spec.Containers[0].Image = img
		eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{p}})
	}
	step()
	// Nothing is due: the resync is a minute away.
	next, _ := eng.SyncOnce(ctx)
	if d, _ := eng.due.Due(pod.UID); d.Sub(t0) < time.Minute || d.Sub(t0) >= 90*time.Second || next != time.Second {
		t.Errorf("resync due %v, next step %v", d.Sub(t0), next)
	}
	p := pod.DeepCopy()
	p.Spec.Containers[0].Image = "block"
	eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{p}})
	step()
	step()
	step()
	want := []string{"sync v3", "sync block", "cancelled", "terminating 7s", "terminated"}
	if got := rec.get(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] || got[4] != want[4] {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if l, _ := eng.PodLifecycle(pod.UID); l != Done {
		t.Errorf("lifecycle %s", l)
	}
	// Done ignores updates but REMOVE.
	eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{pod}})
	step()
	if got := rec.get(); len(got) != len(want) {
		t.Errorf("synced after Done: %v", got)
	}
	eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	if _, ok := eng.PodLifecycle(pod.UID); ok || len(w.removed) != 1 || len(w.terminated) != 1 {
		t.Errorf("after REMOVE: removed %v terminated %v", w.removed, w.terminated)
	}
}

func TestPodGracePeriod(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, "a")
	if g := PodGracePeriod(pod); g != 30*time.Second {
		t.Errorf("default %v", g)
	}
	zero, five := int64(0), int64(5)
	pod.Spec.TerminationGracePeriodSeconds = &five
	if g := PodGracePeriod(pod); g != 5*time.Second {
		t.Errorf("spec %v", g)
	}
	pod.DeletionGracePeriodSeconds = &zero
	if g := PodGracePeriod(pod); g != time.Second {
		t.Errorf("deletion grace 0: %v, want the 1s floor", g)
	}
}
