package usage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reader returns a file whole whatever its size, keeps its buffer for
// the next read unless it grew past readerMaxKept, and parses numbers,
// "max" and keyed files with spaces, tabs and kB.
func TestReader(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var r reader
	for _, size := range []int{0, 10, readerBuf, readerBuf + 1, 3 * readerBuf, readerMaxKept + 1} {
		want := strings.Repeat("x", size)
		got, err := r.read(write("f", want))
		if err != nil || string(got) != want {
			t.Fatalf("%d bytes: read %d, %v", size, len(got), err)
		}
		if kept := r.buf != nil; kept != (size <= readerMaxKept) {
			t.Fatalf("%d bytes: buffer of %d kept %v", size, len(r.buf), kept)
		}
	}
	if _, err := r.read(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}

	if v, ok, err := r.uint(write("n", "42\n")); v != 42 || !ok || err != nil {
		t.Fatalf("uint: %d %v %v", v, ok, err)
	}
	if _, ok, err := r.uint(write("max", "max\n")); ok || err != nil {
		t.Fatalf("max: %v %v", ok, err)
	}
	if _, _, err := r.uint(write("bad", "4x\n")); err == nil {
		t.Fatal("no error for 4x")
	}
	var a, b, c, d uint64
	err := r.keyed(write("keyed", "a 1\nb:\t 2 kB\n\nc\n  d   4\nbad x\n"), map[string]*uint64{"a": &a, "b": &b, "c": &c, "d": &d, "bad": &c})
	if err != nil || a != 1 || b != 2048 || c != 0 || d != 4 {
		t.Fatalf("keyed: a %d b %d c %d d %d, %v", a, b, c, d, err)
	}
	var lines []string
	if err := r.lines(write("lines", "one\ntwo"), func(l string) { lines = append(lines, l) }); err != nil || len(lines) != 2 || lines[0] != "one\n" || lines[1] != "two" {
		t.Fatalf("lines %q, %v", lines, err)
	}
}
