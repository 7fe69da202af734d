// Command apicheck holds nodekit's exported API to the release it was last
// compared against: it fails when an exported identifier of a public package
// was removed, renamed or changed incompatibly and CHANGELOG.md does not name
// it. hack/api-check.sh runs it; `make test` runs that.
//
//	apicheck -root DIR -baseline DIR            # check
//	apicheck -root DIR -baseline DIR -write     # write the baseline from DIR
//
// # What is compared
//
// Every package of the module at -root except those under internal/ and
// examples/ and commands (package main): the <pkg>test fakes are public API
// too. The baseline directory holds one file per package, PKG.x.gz: the
// package's import path on a line, then its export data
// (golang.org/x/tools/go/gcexportdata, with file names made relative so that
// the bytes do not depend on where the tree or the module cache is),
// gzipped; plus api.txt, a readable list of the same API for review.
// golang.org/x/exp/apidiff sorts the differences into compatible (additions:
// no entry needed) and incompatible ones.
//
// # The CHANGELOG rule
//
// An incompatible change is reported by apidiff as "NAME: what", for example
// "NewCRI: removed", "Options.Nodes: removed" or "(*Manager).Trigger:
// removed". It is listed when the part of CHANGELOG.md from its first "## "
// heading down to the baseline release's heading ("## v0.1.0") names
// PKG.NAME, where PKG is the package's import path relative to the module
// ("podsync", "heartbeat/fleet"; "nodekit" for the module's root package)
// and NAME is written without pointer receivers or type parameters
// ("(*Manager).Trigger" and "(*Cache[K, V]).Get" are Manager.Trigger and
// Cache.Get; the CHANGELOG may write either form). PKG.NAME must stand as a
// whole name: not preceded by a letter, digit, "_", "." or "/", and not
// followed by a letter, digit or "_", nor by "." and one of those. So
// "podsync.Options.Sources" lists the field Sources of podsync.Options but
// not podsync.Options itself, and "podsync.Options" does not list the
// field. A package removed as a whole is listed by its path alone
// ("podsync/foo").
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apicheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the module's root directory")
	baseline := fs.String("baseline", "", "the baseline directory, named after its release (v0.1.0)")
	changelog := fs.String("changelog", "", "the CHANGELOG (default: ROOT/CHANGELOG.md)")
	write := fs.Bool("write", false, "write the baseline from the packages at -root instead of checking")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *baseline == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: apicheck -root DIR -baseline DIR [-changelog FILE] [-write]")
		return 2
	}
	if *changelog == "" {
		*changelog = filepath.Join(*root, "CHANGELOG.md")
	}
	var err error
	if *write {
		err = writeBaseline(*root, *baseline, stdout)
	} else {
		var unlisted []string
		var total int
		unlisted, total, err = check(*root, *baseline, *changelog)
		if err == nil && len(unlisted) > 0 {
			report(stderr, unlisted, *baseline, *changelog)
			return 1
		}
		if err == nil && total == 0 {
			fmt.Fprintf(stdout, "api-check: no incompatible change to the API of %s\n", filepath.Base(*baseline))
		} else if err == nil {
			fmt.Fprintf(stdout, "api-check: %d incompatible change(s) to the API of %s, each named in %s\n",
				total, filepath.Base(*baseline), filepath.Base(*changelog))
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "api-check:", err)
		return 1
	}
	return 0
}

func report(w io.Writer, unlisted []string, baseline, changelog string) {
	version := filepath.Base(baseline)
	fmt.Fprintf(w, "api-check: %d incompatible change(s) to the API of %s that %s does not name:\n",
		len(unlisted), version, filepath.Base(changelog))
	for _, u := range unlisted {
		fmt.Fprintln(w, "  "+u)
	}
	fmt.Fprintf(w, "Either undo them, or add a line for each under \"## Unreleased\" in %s\n", filepath.Base(changelog))
	fmt.Fprintln(w, "(in \"### Removed or renamed\" or \"### Changed\") naming it as written above, e.g.:")
	fmt.Fprintf(w, "  - %s: replaced by ...\n", strings.SplitN(unlisted[0], ": ", 2)[0])
}

// A pkgAPI is one package's API: its path relative to the module and its types.
type pkgAPI struct {
	rel   string
	types *types.Package
}

// pkgName is how CHANGELOG.md names the package at rel.
func pkgName(rel string) string {
	if rel == "" {
		return "nodekit"
	}
	return rel
}

// fileName is the baseline file of the package at rel.
func fileName(rel string) string {
	if rel == "" {
		return "_root.x.gz"
	}
	return strings.ReplaceAll(rel, "/", ".") + ".x.gz"
}

// public reports whether the package at rel (relative to the module) is
// public API.
func public(rel, name string) bool {
	if name == "main" {
		return false
	}
	for _, elem := range strings.Split(rel, "/") {
		if elem == "internal" {
			return false
		}
	}
	return rel != "examples" && !strings.HasPrefix(rel, "examples/")
}

// load type-checks the public packages of the module at root.
func load(root string) (string, []pkgAPI, *token.FileSet, error) {
	fset := token.NewFileSet()
	cfg := &packages.Config{
		Dir:  root,
		Fset: fset,
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule,
	}
	loaded, err := packages.Load(cfg, "./...")
	if err != nil {
		return "", nil, nil, err
	}
	var errs []error
	var modPath string
	var pkgs []pkgAPI
	for _, p := range loaded {
		if p.Module == nil {
			errs = append(errs, fmt.Errorf("%s: not in a module", p.PkgPath))
			continue
		}
		modPath = p.Module.Path
		rel := strings.TrimPrefix(strings.TrimPrefix(p.PkgPath, p.Module.Path), "/")
		if !public(rel, p.Name) {
			// What does not build there is for the build and the
			// tests to report.
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %v", p.PkgPath, e))
		}
		pkgs = append(pkgs, pkgAPI{rel, p.Types})
	}
	if len(errs) > 0 {
		return "", nil, nil, errors.Join(errs...)
	}
	if len(pkgs) == 0 {
		return "", nil, nil, fmt.Errorf("no public packages under %s", root)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].rel < pkgs[j].rel })
	return modPath, pkgs, fset, nil
}

// portable returns a copy of fset whose file names do not depend on where
// the module, the module cache or GOROOT are, so that export data written
// with it is the same on every machine.
func portable(fset *token.FileSet, root string) *token.FileSet {
	abs, _ := filepath.Abs(root)
	prefixes := [][2]string{{abs + string(filepath.Separator), ""}}
	env := goEnv(root, "GOMODCACHE", "GOROOT")
	for i, v := range []string{"$GOMODCACHE/", "$GOROOT/"} {
		if env[i] != "" {
			prefixes = append(prefixes, [2]string{filepath.Clean(env[i]) + string(filepath.Separator), v})
		}
	}
	out := token.NewFileSet()
	fset.Iterate(func(f *token.File) bool {
		name := f.Name()
		for _, p := range prefixes {
			if rest, ok := strings.CutPrefix(name, p[0]); ok {
				name = p[1] + filepath.ToSlash(rest)
				break
			}
		}
		g := out.AddFile(name, f.Base(), f.Size())
		g.SetLines(f.Lines())
		return true
	})
	return out
}

// goEnv returns the values of the go command's variables names, as seen
// from dir.
func goEnv(dir string, names ...string) []string {
	cmd := exec.Command("go", append([]string{"env"}, names...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return make([]string, len(names))
	}
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for len(vals) < len(names) {
		vals = append(vals, "")
	}
	return vals
}

// writeBaseline writes the export data of every public package at root into
// dir, replacing what was there.
func writeBaseline(root, dir string, stdout io.Writer) error {
	modPath, pkgs, fset, err := load(root)
	if err != nil {
		return err
	}
	pfset := portable(fset, root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.x.gz"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	var txt bytes.Buffer
	fmt.Fprintf(&txt, "# The exported API of %s at %s, one package after another\n", modPath, filepath.Base(dir))
	fmt.Fprintf(&txt, "# (written by hack/api-check.sh --write; the .x.gz files beside this one are what is compared)\n")
	for _, p := range pkgs {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf) // no name, no time: the same bytes every time
		// The export data does not record the path of its package: the
		// first line does.
		fmt.Fprintln(zw, p.types.Path())
		if err := gcexportdata.Write(zw, pfset, p.types); err != nil {
			return fmt.Errorf("writing %s: %v", p.types.Path(), err)
		}
		if err := zw.Close(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, fileName(p.rel)), buf.Bytes(), 0o644); err != nil {
			return err
		}
		describe(&txt, p)
	}
	if err := os.WriteFile(filepath.Join(dir, "api.txt"), txt.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "api-check: wrote the API of %d packages of %s to %s\n", len(pkgs), modPath, dir)
	return nil
}

// describe writes a readable list of the package's exported API.
func describe(w io.Writer, p pkgAPI) {
	fmt.Fprintf(w, "\npackage %s\n", pkgName(p.rel))
	qual := types.RelativeTo(p.types)
	scope := p.types.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		named, isNamed := obj.Type().(*types.Named)
		if !ok || tn.IsAlias() || !isNamed {
			fmt.Fprintf(w, "\t%s\n", types.ObjectString(obj, qual))
			continue
		}
		st, ok := named.Underlying().(*types.Struct)
		if !ok {
			fmt.Fprintf(w, "\t%s\n", types.ObjectString(obj, qual))
		} else {
			// A struct's exported fields only, one a line.
			fmt.Fprintf(w, "\ttype %s%s struct\n", name, typeParamList(named, qual))
			for i := 0; i < st.NumFields(); i++ {
				if f := st.Field(i); f.Exported() {
					if f.Embedded() {
						fmt.Fprintf(w, "\t\t%s (embedded)\n", types.TypeString(f.Type(), qual))
					} else {
						fmt.Fprintf(w, "\t\t.%s %s\n", f.Name(), types.TypeString(f.Type(), qual))
					}
				}
			}
		}
		var methods []string
		for i := 0; i < named.NumMethods(); i++ {
			if m := named.Method(i); m.Exported() {
				methods = append(methods, types.ObjectString(m, qual))
			}
		}
		slices.Sort(methods)
		for _, m := range methods {
			fmt.Fprintf(w, "\t\t%s\n", m)
		}
	}
}

func typeParamList(named *types.Named, qual types.Qualifier) string {
	tps := named.TypeParams()
	if tps.Len() == 0 {
		return ""
	}
	var parts []string
	for i := 0; i < tps.Len(); i++ {
		tp := tps.At(i)
		parts = append(parts, tp.Obj().Name()+" "+types.TypeString(tp.Constraint(), qual))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// readBaseline reads every package of the baseline in dir.
func readBaseline(dir string) ([]pkgAPI, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.x.gz"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no baseline in %s (hack/api-check.sh --write writes it)", dir)
	}
	var pkgs []pkgAPI
	var modPath string
	for _, f := range files {
		data, err := readGzip(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		path, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("%s: no package path", f)
		}
		// Each package is decoded on its own: export data holds what it
		// needs of its dependencies, and apidiff tells types of other
		// packages apart by name.
		tp, err := gcexportdata.Read(bytes.NewReader(rest), token.NewFileSet(), map[string]*types.Package{}, string(path))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %v", f, err)
		}
		pkgs = append(pkgs, pkgAPI{types: tp})
		if filepath.Base(f) == "_root.x.gz" {
			modPath = tp.Path()
		}
	}
	if modPath == "" {
		// No root package: the module path is the longest common prefix.
		modPath = commonPath(pkgs)
	}
	for i := range pkgs {
		pkgs[i].rel = strings.TrimPrefix(strings.TrimPrefix(pkgs[i].types.Path(), modPath), "/")
	}
	return pkgs, nil
}

func readGzip(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func commonPath(pkgs []pkgAPI) string {
	prefix := strings.Split(pkgs[0].types.Path(), "/")
	for _, p := range pkgs[1:] {
		elems := strings.Split(p.types.Path(), "/")
		n := 0
		for n < len(prefix) && n < len(elems) && prefix[n] == elems[n] {
			n++
		}
		prefix = prefix[:n]
	}
	if len(pkgs) == 1 {
		prefix = prefix[:len(prefix)-1]
	}
	return strings.Join(prefix, "/")
}

// check returns the incompatible changes from the baseline in dir to the
// packages at root that the CHANGELOG does not name, each as PKG.NAME: what,
// and the number of incompatible changes.
func check(root, dir, changelog string) (unlisted []string, total int, err error) {
	old, err := readBaseline(dir)
	if err != nil {
		return nil, 0, err
	}
	_, cur, _, err := load(root)
	if err != nil {
		return nil, 0, err
	}
	text, err := listed(changelog, filepath.Base(dir))
	if err != nil {
		return nil, 0, err
	}
	byRel := map[string]*types.Package{}
	for _, p := range cur {
		byRel[p.rel] = p.types
	}
	for _, o := range old {
		n, ok := byRel[o.rel]
		if !ok {
			total++
			if !mentions(text, o.rel) {
				unlisted = append(unlisted, pkgName(o.rel)+": package removed")
			}
			continue
		}
		for _, c := range apidiff.Changes(o.types, n).Changes {
			if c.Compatible {
				continue
			}
			total++
			name, what, _ := strings.Cut(c.Message, ": ")
			q := pkgName(o.rel) + "." + normalize(name)
			if !mentions(text, q) {
				unlisted = append(unlisted, q+": "+what)
			}
		}
	}
	return unlisted, total, nil
}

// listed returns the part of the CHANGELOG that lists changes since the
// release version: from its first "## " heading to the heading of version.
func listed(changelog, version string) (string, error) {
	data, err := os.ReadFile(changelog)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	in, found := false, false
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(line, "## ") {
			f := strings.Fields(line)
			if len(f) > 1 && f[1] == version {
				found = true
				break
			}
			in = true
		}
		if in {
			b.WriteString(line)
		}
	}
	if !found {
		return "", fmt.Errorf("%s has no %q heading (the release the baseline was taken at)", changelog, "## "+version)
	}
	return normalize(b.String()), nil
}

var (
	pointerRecv = regexp.MustCompile(`\(\*([A-Za-z_][A-Za-z0-9_]*)\)`)
	// A type parameter list right after a type's name: "Cache[K, V]".
	typeParams = regexp.MustCompile(`([A-Za-z0-9_])\[[A-Za-z_][A-Za-z0-9_]*(?:, ?[A-Za-z_][A-Za-z0-9_]*)*\]`)
)

// normalize writes "(*T)" as "T" and drops type parameter lists, so that
// "(*Cache[K, V]).Get" reads "Cache.Get".
func normalize(s string) string {
	return pointerRecv.ReplaceAllString(typeParams.ReplaceAllString(s, "$1"), "$1")
}

// mentions reports whether text names q as a whole name (see the package
// documentation).
func mentions(text, q string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], q)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(q)
		i = start + 1
		if start > 0 && (isIdent(text[start-1]) || text[start-1] == '.' || text[start-1] == '/') {
			continue
		}
		if end < len(text) && isIdent(text[end]) {
			continue
		}
		if end+1 < len(text) && (text[end] == '.' || text[end] == '/') && isIdent(text[end+1]) {
			continue
		}
		return true
	}
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}
