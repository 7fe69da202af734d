package podsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// aliasBomb is a valid Pod manifest of about 1 MiB whose one large string
// is anchored once and referenced 200 times: within the YAML decoder's
// alias limits, and about 200 MiB once expanded.
func aliasBomb() []byte {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\nspec:\n  containers:\n  - name: app\n    image: app:1\n    env:\n    - name: BIG\n      value: &big \"")
	b.WriteString(strings.Repeat("x", 1<<20-4096))
	b.WriteString("\"\n    args:\n")
	for range 200 {
		b.WriteString("    - *big\n")
	}
	return []byte(b.String())
}

// heapBound is what decoding a rejected bomb may allocate: well below the
// ~600 MiB expanding it would take.
const heapBound = 64 << 20

// allocated runs f and returns the bytes it allocated (TotalAlloc delta; other
// goroutines count too, which only makes the bound stricter).
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func checkBombErr(t *testing.T, what string, err error, location string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidManifest) {
		t.Fatalf("%s: error %v, want an invalid manifest", what, err)
	}
	if want := location + ": manifest of "; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "expands to more than 10485760 through YAML aliases") {
		t.Errorf("%s: error %q, want it to name %s and the expansion", what, err, location)
	}
}

func TestAliasBombDecodeManifest(t *testing.T) {
	data := aliasBomb()
	if len(data) > 1<<20 {
		t.Fatalf("bomb is %d bytes, want at most 1 MiB", len(data))
	}
	var err error
	n := allocated(func() {
		_, err = DecodeManifest(data, Origin{Source: FileSource, Location: "/m/bomb.yaml", NodeName: "n1"})
	})
	checkBombErr(t, "DecodeManifest", err, "podsource: file /m/bomb.yaml")
	t.Logf("DecodeManifest of a %d-byte bomb allocated %d bytes", len(data), n)
	if n > heapBound {
		t.Errorf("DecodeManifest allocated %d bytes, want at most %d", n, heapBound)
	}
	var lerr error
	n = allocated(func() {
		_, lerr = DecodeManifestList(data, Origin{Source: HTTPSource, Location: "http://x/m", NodeName: "n1"})
	})
	checkBombErr(t, "DecodeManifestList", lerr, "podsource: http http://x/m")
	if n > heapBound {
		t.Errorf("DecodeManifestList allocated %d bytes, want at most %d", n, heapBound)
	}
}

func TestAliasBombFileSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bomb.yaml")
	if err := os.WriteFile(path, aliasBomb(), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := NewFile(FileOptions{Path: dir, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	var pods int
	n := allocated(func() {
		if err := src.SyncOnce(context.Background()); err != nil {
			t.Error(err)
		}
		pods = len(src.Pods())
	})
	if pods != 0 {
		t.Errorf("%d pods from a bomb", pods)
	}
	checkBombErr(t, "file source", src.Errors()[path], "podsource: file "+path)
	t.Logf("file source allocated %d bytes", n)
	if n > heapBound {
		t.Errorf("file source allocated %d bytes, want at most %d", n, heapBound)
	}
}

func TestAliasBombHTTPSource(t *testing.T) {
	data := aliasBomb()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(data)
	}))
	defer srv.Close()
	src, err := NewHTTP(HTTPOptions{URL: srv.URL + "/pods", NodeName: "n1", Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	n := allocated(func() { serr = src.SyncOnce(context.Background()) })
	checkBombErr(t, "http source", serr, "podsource: http "+srv.URL+"/pods")
	t.Logf("http source allocated %d bytes", n)
	if n > heapBound {
		t.Errorf("http source allocated %d bytes, want at most %d", n, heapBound)
	}
}

// Aliases that expand a little are fine, and an alias inside its own
// anchor is refused rather than followed.
func TestExpandedSize(t *testing.T) {
	small := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: &l {app: a}\n  annotations: *l\nspec:\n  containers:\n  - name: app\n    image: app:1\n"
	pod, err := DecodeManifest([]byte(small), Origin{Source: FileSource, Location: "/m/a.yaml", NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Annotations["app"] != "a" {
		t.Errorf("annotations %v: alias not expanded", pod.Annotations)
	}
	if n, ok := expandedSize([]byte(small), 1000); !ok || n < len("app")*2 || n > 1000 {
		t.Errorf("expandedSize = %d, %v", n, ok)
	}
	// A document of tiny scalars, with a '*' that is no alias, counts no
	// more than its length, so no manifest within MaxManifestBytes is
	// refused unless its aliases expand it.
	var tiny strings.Builder
	tiny.WriteString("args: [\"ls *\"")
	for range 10000 {
		tiny.WriteString(",a")
	}
	tiny.WriteString("]\nm: {")
	for i := range 1000 {
		fmt.Fprintf(&tiny, "k%d: , ", i)
	}
	tiny.WriteString("}\n")
	if n, ok := expandedSize([]byte(tiny.String()), 1<<20); !ok || n > tiny.Len() {
		t.Errorf("tiny scalars: expandedSize = %d, %v; want at most the length %d", n, ok, tiny.Len())
	}
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
	if n, ok := expandedSize([]byte(laughs), 1<<20); !ok || n != 1<<20+1 {
		t.Errorf("billion laughs: expandedSize = %d, %v; want the limit passed", n, ok)
	}
}
