package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The tests copy testdata/fixture (a module of the standard library only, so
// no network is needed) to a temporary directory, write its baseline, change
// its source and check it.

var (
	baselineOnce sync.Once
	baselineDir  string
	baselineErr  string
)

// baseline writes the fixture's baseline once for all tests.
func baseline(t *testing.T) string {
	t.Helper()
	baselineOnce.Do(func() {
		dir, err := os.MkdirTemp("", "apicheck-baseline-")
		if err != nil {
			baselineErr = err.Error()
			return
		}
		baselineDir = filepath.Join(dir, "v0.1.0")
		var out, errb bytes.Buffer
		if code := run([]string{"-root", "testdata/fixture", "-baseline", baselineDir, "-write"}, &out, &errb); code != 0 {
			baselineErr = errb.String()
		}
	})
	if baselineErr != "" {
		t.Fatalf("writing the baseline: %s", baselineErr)
	}
	return baselineDir
}

func TestMain(m *testing.M) {
	os.Setenv("GOWORK", "off")
	code := m.Run()
	if baselineDir != "" {
		os.RemoveAll(filepath.Dir(baselineDir))
	}
	os.Exit(code)
}

// fixture returns a fresh copy of the fixture module.
func fixture(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir("testdata/fixture", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/fixture", path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces old by new in the file at root/name.
func edit(t *testing.T, root, name, old, new string) {
	t.Helper()
	p := filepath.Join(root, name)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", name, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// list adds lines under "### Removed or renamed" in root's CHANGELOG.md.
func list(t *testing.T, root string, lines ...string) {
	t.Helper()
	edit(t, root, "CHANGELOG.md", "### Removed or renamed\n",
		"### Removed or renamed\n\n"+strings.Join(lines, "\n")+"\n")
}

// check1 runs the check on root and returns its exit code and output.
func check1(t *testing.T, root string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run([]string{"-root", root, "-baseline", baseline(t)}, &out, &errb)
	return code, out.String() + errb.String()
}

func wantFail(t *testing.T, root string, names ...string) {
	t.Helper()
	code, out := check1(t, root)
	if code != 1 {
		t.Fatalf("check: exit %d, want 1; output:\n%s", code, out)
	}
	for _, n := range names {
		if !strings.Contains(out, "\n  "+n+"\n") {
			t.Errorf("check's output does not name %q:\n%s", n, out)
		}
	}
	if got := strings.Count(out, "\n  ") - 1; got != len(names) { // minus the example line
		t.Errorf("check named %d changes, want %d:\n%s", got, len(names), out)
	}
}

func wantPass(t *testing.T, root string) {
	t.Helper()
	if code, out := check1(t, root); code != 0 {
		t.Fatalf("check: exit %d, want 0; output:\n%s", code, out)
	}
}

func TestUnchanged(t *testing.T) {
	wantPass(t, fixture(t))
}

func TestRemovedFunc(t *testing.T) {
	root := fixture(t)
	edit(t, root, "podsync/podsync.go", "func NewCRI(", "func New(")
	// The CHANGELOG's header names podsync.NewCRI: it does not count.
	wantFail(t, root, "podsync.NewCRI: removed")
	list(t, root, "- podsync.NewCRI: replaced by podsync.New.")
	wantPass(t, root)
}

func TestRenamedField(t *testing.T) {
	root := fixture(t)
	edit(t, root, "podsync/podsync.go", "\tSources []string", "\tInputs []string")
	// Naming the struct, or a longer name, does not list the field.
	list(t, root, "- podsync.Options: its field Sources is now Inputs.", "- podsync.Options.SourcesList: never was.")
	wantFail(t, root, "podsync.Options.Sources: removed")
	list(t, root, "- `podsync.Options.Sources`: replaced by podsync.Options.Inputs.")
	wantPass(t, root)
}

func TestListedUnderTheRelease(t *testing.T) {
	// CHANGELOG.md names podsync.Options.Nodes under "## v0.1.0": below
	// the baseline's heading, which does not count.
	root := fixture(t)
	edit(t, root, "podsync/podsync.go", "\tNodes   int", "\tNodes   int64")
	wantFail(t, root, "podsync.Options.Nodes: changed from int to int64")
}

func TestMethods(t *testing.T) {
	root := fixture(t)
	edit(t, root, "podsync/podsync.go", "func (m *Manager) Trigger() {}", "")
	edit(t, root, "podsync/podsync.go", "func (c *Cache[K, V]) Get(k K) V", "func (c *Cache[K, V]) Lookup(k K) V")
	wantFail(t, root, "podsync.Manager.Trigger: removed", "podsync.Cache.Get: removed")
	// Either form names a method.
	list(t, root, "- podsync.(*Manager).Trigger: gone.", "- podsync.(*Cache[K, V]).Get: replaced by podsync.Cache.Lookup.")
	wantPass(t, root)
}

func TestFakeAndRoot(t *testing.T) {
	root := fixture(t)
	edit(t, root, "podsync/podsynctest/podsynctest.go", "Calls int", "calls int")
	edit(t, root, "doc.go", `"0.1.0"`, `"0.2.0"`)
	wantFail(t, root, "podsync/podsynctest.Fake.Calls: removed", `nodekit.Version: value changed from "0.1.0" to "0.2.0"`)
	list(t, root, "- podsync/podsynctest.Fake.Calls: unexported.", "- nodekit.Version: 0.2.0.")
	wantPass(t, root)
}

func TestRemovedPackage(t *testing.T) {
	root := fixture(t)
	if err := os.RemoveAll(filepath.Join(root, "podsync/foo")); err != nil {
		t.Fatal(err)
	}
	// Naming an identifier of the package is not naming the package.
	list(t, root, "- podsync/foo.Bar: gone.")
	wantFail(t, root, "podsync/foo: package removed")
	list(t, root, "- podsync/foo: removed; podsync does what it did.")
	wantPass(t, root)
}

func TestNotAPI(t *testing.T) {
	// Changes under internal/ and examples/, and additions, need no entry.
	root := fixture(t)
	edit(t, root, "internal/hidden/hidden.go", "func Gone() {}", "")
	edit(t, root, "examples/demo/main.go", "func main() {}", "func main() { println() }\n\n// Exported is new.\nfunc Exported() {}")
	edit(t, root, "podsync/podsync.go", "\tNodes   int\n", "\tNodes   int\n\tExtra   bool\n")
	if err := os.WriteFile(filepath.Join(root, "podsync/new.go"), []byte("package podsync\n\n// Added is new.\nfunc Added() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantPass(t, root)
}

// TestReproducible writes the baseline from a copy of the fixture in another
// directory: the bytes are the same.
func TestReproducible(t *testing.T) {
	want := baseline(t)
	got := filepath.Join(t.TempDir(), "v0.1.0")
	var out, errb bytes.Buffer
	if code := run([]string{"-root", fixture(t), "-baseline", got, "-write"}, &out, &errb); code != 0 {
		t.Fatalf("write: %s", errb.String())
	}
	files, _ := filepath.Glob(filepath.Join(want, "*"))
	if len(files) != 5 { // four packages and api.txt
		t.Errorf("baseline has %d files, want 5: %v", len(files), files)
	}
	for _, f := range files {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(got, filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from one copy to another (%v)", filepath.Base(f), err)
		}
	}
}

func TestMentions(t *testing.T) {
	for _, c := range []struct {
		text, q string
		want    bool
	}{
		{"- podsync.NewCRI: replaced", "podsync.NewCRI", true},
		{"`podsync.NewCRI`", "podsync.NewCRI", true},
		{"ends with podsync.NewCRI.", "podsync.NewCRI", true},
		{"podsync.NewCRI", "podsync.NewCRI", true},
		{"podsync.NewCRIClient", "podsync.NewCRI", false},
		{"podsync.NewCRI.Field", "podsync.NewCRI", false},
		{"xpodsync.NewCRI", "podsync.NewCRI", false},
		{"eviction/podsync.NewCRI", "podsync.NewCRI", false},
		{"a.podsync.NewCRI", "podsync.NewCRI", false},
		{"podsync.NewCRIClient and podsync.NewCRI", "podsync.NewCRI", true},
		{"podsync/foo", "podsync/foo", true},
		{"podsync/foo/bar", "podsync/foo", false},
		{"podsync/foo.Bar", "podsync/foo", false},
	} {
		if got := mentions(normalize(c.text), c.q); got != c.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", c.text, c.q, got, c.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"(*Manager).Trigger":           "Manager.Trigger",
		"podsync.(*Cache[K, V]).Get":   "podsync.Cache.Get",
		"Cache[K,V].Get":               "Cache.Get",
		"[Keep a Changelog](https://)": "[Keep a Changelog](https://)",
		"see [podsync]":                "see [podsync]",
	} {
		if got := normalize(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
}
