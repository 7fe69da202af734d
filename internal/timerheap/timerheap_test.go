package timerheap

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestOrderTiesMovesAndRemoval(t *testing.T) {
	var h Heap[string]
	t0 := time.Unix(0, 0)
	h.Set("c", t0.Add(3*time.Second))
	h.Set("a", t0.Add(time.Second))
	h.Set("b", t0.Add(time.Second)) // same instant as a, scheduled later
	h.Set("d", t0.Add(5*time.Second))
	h.Set("d", t0) // moved earlier
	if !h.Remove("c") || h.Remove("c") {
		t.Fatal("Remove reported wrongly")
	}
	if _, ok := h.PopDue(t0.Add(-time.Nanosecond)); ok {
		t.Fatal("popped a key before it was due")
	}
	var got []string
	for {
		k, ok := h.PopDue(t0.Add(time.Hour))
		if !ok {
			break
		}
		got = append(got, k)
	}
	if want := []string{"d", "a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if h.Len() != 0 {
		t.Fatalf("Len %d after draining", h.Len())
	}
}

func TestRandomAgainstSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Heap[int]
	want := map[int]time.Time{}
	for range 5000 {
		k := r.IntN(300)
		switch r.IntN(3) {
		case 0, 1:
			d := time.Unix(int64(r.IntN(1000)), 0)
			h.Set(k, d)
			want[k] = d
		case 2:
			_, had := want[k]
			if h.Remove(k) != had {
				t.Fatalf("Remove(%d) disagrees", k)
			}
			delete(want, k)
		}
	}
	for k, d := range want {
		if got, ok := h.Due(k); !ok || !got.Equal(d) {
			t.Fatalf("Due(%d) = %v, %v; want %v", k, got, ok, d)
		}
	}
	var last time.Time
	for h.Len() > 0 {
		k, d, _ := h.Peek()
		if d.Before(last) {
			t.Fatalf("out of order: %v after %v", d, last)
		}
		last = d
		if !d.Equal(want[k]) {
			t.Fatalf("key %d due %v, want %v", k, d, want[k])
		}
		h.PopDue(d)
		delete(want, k)
	}
	if len(want) != 0 {
		t.Fatalf("%d keys lost", len(want))
	}
}
