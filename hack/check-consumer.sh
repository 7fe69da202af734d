#!/usr/bin/env bash
# Checks that a program importing nodekit's library packages does not get
# nodekit's test-only modules: it makes a throw-away module outside the
# source tree that imports every public package (suites that link package
# testing from a _test.go file), points it at this checkout with a replace
# directive, runs `go mod tidy` and `go build`, and fails naming any module
# from the list below that its go.mod lists or that nodekit's packages or
# their tests need (which would put it in the consumer's go.sum). A module
# that reaches go.sum only through another module's own tests is reported
# as a note.
#
# Needs the Go module proxy (or a module cache that already holds what
# nodekit requires).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
forbidden=(
  sigs.k8s.io/controller-runtime
  k8s.io/apiextensions-apiserver
  github.com/evanphx/json-patch/v5
  go.uber.org/goleak
  github.com/opencontainers/image-spec
  github.com/opencontainers/go-digest
)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/nodekit-consumer.XXXXXX")
trap '[ -n "${KEEP:-}" ] && echo "kept $tmp" >&2 || rm -rf "$tmp"' EXIT

# Every importable package: not internal, not under examples, not a command.
# A package that links package testing is imported from a test file.
mapfile -t lines < <(cd "$root" && go list -f '{{if ne .Name "main"}}{{.ImportPath}}{{range .Deps}}{{if eq . "testing"}} testing{{end}}{{end}}{{end}}' ./... |
  grep -v -e '/internal/' -e '/internal$' -e '/examples/' | grep -v '^$')
if [ ${#lines[@]} -eq 0 ]; then
  echo "check-consumer: no packages found under $root" >&2
  exit 1
fi
main_imports=() test_imports=()
for l in "${lines[@]}"; do
  pkg=${l%% *}
  if [ "$l" != "$pkg" ]; then test_imports+=("$pkg"); else main_imports+=("$pkg"); fi
done

{
  echo "package main"
  echo
  echo "import ("
  for p in "${main_imports[@]}"; do echo "	_ \"$p\""; done
  echo ")"
  echo
  echo "func main() {}"
} >"$tmp/main.go"
if [ ${#test_imports[@]} -gt 0 ]; then
  {
    echo "package main"
    echo
    echo "import ("
    for p in "${test_imports[@]}"; do echo "	_ \"$p\""; done
    echo ")"
  } >"$tmp/main_test.go"
fi

(
  cd "$tmp"
  export GOFLAGS=-mod=mod GOWORK=off
  go mod init example.com/consumer >/dev/null 2>&1
  go mod edit -require github.com/nodekit/nodekit@v0.0.0 -replace "github.com/nodekit/nodekit=$root"
  go mod tidy
  go build ./...
  go vet ./...
)

# 1. The consumer's go.mod lists none of them.
bad=() notes=()
for m in "${forbidden[@]}"; do
  if grep -Eq "^[[:space:]]*(require[[:space:]]+)?$m[[:space:]]" "$tmp/go.mod"; then
    bad+=("$m: listed in the consumer's go.mod")
  fi
done

# 2. Building nodekit's packages and running their tests needs none of them.
#    (go mod tidy records in go.sum what the tests of every package the
#    consumer builds import, nodekit's own included.)
needed=$(cd "$tmp" && GOFLAGS=-mod=mod GOWORK=off go list -deps -test \
  -f '{{if .Module}}{{.Module.Path}}{{end}}' "${main_imports[@]}" "${test_imports[@]}" | sort -u)
for m in "${forbidden[@]}"; do
  if grep -qx "$m" <<<"$needed"; then
    via=$(cd "$tmp" && GOFLAGS=-mod=mod GOWORK=off go list -deps -test \
      -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' "${main_imports[@]}" "${test_imports[@]}" |
      awk -v m="$m" '$1 != m && index($1, m "/") != 1 { for (i = 2; i <= NF; i++) if ($i == m || index($i, m "/") == 1) { print $1; break } }' | sort -u | head -3 | tr '\n' ' ')
    bad+=("$m: needed to build or test nodekit's packages (imported by: ${via:-?})")
  fi
done

# 3. go.sum may still hold a checksum for one of them when another module's
#    own tests import it (client-go's and client_golang's tests use goleak):
#    tidy records those too, and nodekit cannot change that. Say so.
for m in "${forbidden[@]}"; do
  if grep -q "^$m " "$tmp/go.sum" && ! grep -qx "$m" <<<"$needed"; then
    notes+=("$m in the consumer's go.sum only through another module's tests: $(cd "$tmp" && go mod why -m "$m" 2>/dev/null | sed -n '2,$p' | tr '\n' ' ')")
  fi
done

if [ ${#notes[@]} -gt 0 ]; then
  printf 'check-consumer: note: %s\n' "${notes[@]}" >&2
fi
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-consumer: a program importing nodekit gets test-only modules:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-consumer: imported ${#main_imports[@]} packages, ${#test_imports[@]} more from a test file; go.mod lists none of ${forbidden[*]}, and nodekit's packages and tests need none"
