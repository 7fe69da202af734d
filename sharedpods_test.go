package nodekit

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
)

// The store keeps a copy of each pod without managed fields and with the
// annotations a node's merger adds (config.seen kept across updates, new
// for a new UID), leaves the watch's objects as they are, and does not
// re-file a pod a new list shows unchanged; a merger sends its pods as
// they are.
func TestSharedPodsStampsWhatTheMergerAdds(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	s, err := NewSharedPods(SharedPodsOptions{Pods: fake.NewClientset().CoreV1().Pods(""), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	st := sharedStore{s}
	if err := st.Replace(nil, "0"); err != nil { // the first list
		t.Fatal(err)
	}
	pod := func(uid, rv string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: types.UID(uid), ResourceVersion: rv,
				Annotations:   map[string]string{"team": "blue"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "test"}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "app"}}},
		}
	}
	only := func() *corev1.Pod {
		t.Helper()
		pods, _, _ := s.NodePods("n1")
		if len(pods) != 1 {
			t.Fatalf("%d pods for n1, want 1", len(pods))
		}
		return pods[0]
	}
	check := func(p *corev1.Pod, seen time.Time) {
		t.Helper()
		want := map[string]string{"team": "blue", podsource.ConfigSourceAnnotation: podsource.APISource,
			podsource.ConfigSeenAnnotation: seen.Format(time.RFC3339Nano)}
		if len(p.Annotations) != len(want) {
			t.Errorf("annotations %v, want %v", p.Annotations, want)
		}
		for k, v := range want {
			if p.Annotations[k] != v {
				t.Errorf("annotation %s = %q, want %q", k, p.Annotations[k], v)
			}
		}
		if p.ManagedFields != nil {
			t.Errorf("managed fields kept")
		}
	}

	p1 := pod("u1", "1")
	if err := st.Add(p1); err != nil {
		t.Fatal(err)
	}
	got := only()
	check(got, t0)
	if len(p1.Annotations) != 1 || p1.ManagedFields == nil {
		t.Errorf("the watch's object was modified: %v", p1.ObjectMeta)
	}

	clk.Step(time.Minute)
	p2 := pod("u1", "2")
	p2.Status.Phase = corev1.PodRunning
	if err := st.Update(p2); err != nil {
		t.Fatal(err)
	}
	got = only()
	check(got, t0)
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("update not kept: phase %q", got.Status.Phase)
	}

	// A list showing the same version: nothing changes; a new UID under
	// the name: seen now.
	_, gen, _ := s.NodePods("n1")
	if err := st.Replace([]any{pod("u1", "2")}, "2"); err != nil {
		t.Fatal(err)
	}
	if now, gen2, _ := s.NodePods("n1"); gen2 != gen || now[0] != got {
		t.Errorf("an unchanged pod in a new list was filed again (gen %d → %d)", gen, gen2)
	}
	// Without a resource version nothing says a pod is unchanged: it is
	// filed again.
	noVersion := pod("u1", "")
	noVersion.Status.Phase = corev1.PodSucceeded
	if err := st.Replace([]any{noVersion}, "2"); err != nil {
		t.Fatal(err)
	}
	if now := only(); now.Status.Phase != corev1.PodSucceeded {
		t.Errorf("a pod without a resource version in a new list was not filed again: phase %q", now.Status.Phase)
	}
	if err := st.Replace([]any{pod("u2", "3")}, "3"); err != nil {
		t.Fatal(err)
	}
	check(only(), t0.Add(time.Minute))

	// What a node's merger does with them: sends them as they are.
	m, err := podsource.NewMerger(podsource.MergerOptions{Sources: []podsource.PodSource{podsource.SourceFunc(podsource.APISource, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	pods, _, _ := s.NodePods("n1")
	if err := m.Merge(context.Background(), podsource.Update{Op: podsource.OpSet, Source: podsource.APISource, Pods: pods}); err != nil {
		t.Fatal(err)
	}
	if u := <-m.Updates(); len(u.Pods) != 1 || u.Pods[0] != pods[0] {
		t.Errorf("the merger sent %d pods, not the store's pod itself", len(u.Pods))
	}
}
