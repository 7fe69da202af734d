package backoff

import (
	"testing"
	"time"
)

func TestBackoffDoublesToMaxAndResets(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 7 * time.Second}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if b.Current() != 0 || b.Next() != 100*time.Millisecond {
		t.Fatalf("after Reset: wait %v, want 100ms", b.Current())
	}
}

func TestNewChecksBounds(t *testing.T) {
	if _, err := New("heartbeat: Options.RegisterBackoff", 8*time.Second, 7*time.Second, 10*time.Millisecond); err == nil {
		t.Fatal("initial above max accepted")
	}
}

func TestMapPerKeyGrowthExpiryAndReset(t *testing.T) {
	m := Map[string]{Initial: 10 * time.Second, Max: 300 * time.Second}
	t0 := time.Unix(1000, 0)
	now := t0
	var waits []time.Duration
	for range 7 {
		w := m.Next("a", now)
		waits = append(waits, w)
		if end, in := m.Until("a", now); !in || !end.Equal(now.Add(w)) {
			t.Fatalf("Until right after failure = %v, %v", end, in)
		}
		now = now.Add(w)
		if _, in := m.Until("a", now); in {
			t.Fatalf("still backing off when the wait %v has passed", w)
		}
	}
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Fatalf("waits = %v, want %v s", waits, want)
		}
	}
	if m.Wait("b", now) != 0 {
		t.Fatal("an unknown key has a wait")
	}
	// A failure 10 minutes (2×Max) after the last starts over.
	now = now.Add(600 * time.Second)
	if w := m.Next("a", now); w != 10*time.Second {
		t.Fatalf("after 10 quiet minutes: wait %v, want 10s", w)
	}
	m.Next("b", now)
	m.GC(now.Add(599 * time.Second))
	if m.Len() != 2 {
		t.Fatalf("GC dropped a recent key: %d left", m.Len())
	}
	m.GC(now.Add(600 * time.Second))
	if m.Len() != 0 {
		t.Fatalf("GC kept %d stale keys", m.Len())
	}
	m.Next("c", now)
	m.Forget("c")
	if m.Len() != 0 {
		t.Fatal("Forget kept the key")
	}
}
