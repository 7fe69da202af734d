package nodeapi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The reloader reads its files again when one changed on disk (a new
// file renamed over it, or written in place), or when ReloadResync passed
// (a change its stat does not show); it keeps the last good content when
// the new one does not parse or a file is gone.
func TestReloader(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write := func(path, s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "one")
	write(b, "one")
	parses := 0
	parse := func(c [][]byte) (string, error) {
		parses++
		if string(c[0]) != string(c[1]) {
			return "", errors.New("a and b differ")
		}
		return string(c[0]), nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	if _, err := newReloader("pair", clk, parse, a, filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing file: %v, want an error naming it", err)
	}
	parses = 0
	r, err := newReloader("pair", clk, parse, a, b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(want string, wantParses int) {
		t.Helper()
		if got := r.current(ctx); got != want || parses != wantParses {
			t.Fatalf("current %q after %d parses, want %q after %d", got, parses, want, wantParses)
		}
	}
	check("one", 1)
	check("one", 1) // nothing changed: no read
	write(a, "two")
	check("one", 2) // a and b differ: the last good pair
	check("one", 2) // not parsed again until a file changes
	write(b, "two")
	check("two", 3)
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	check("two", 3)
	write(a, "two")
	check("two", 3) // the same content again: not parsed

	// Written in place with the same size and modification time: only
	// the resync sees it.
	for _, p := range []string{a, b} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("six"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	check("two", 3)
	clk.Step(ReloadResync - time.Nanosecond)
	check("two", 3)
	clk.Step(time.Nanosecond)
	check("six", 4)
	check("six", 4)
}
