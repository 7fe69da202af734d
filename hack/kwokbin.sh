#!/usr/bin/env bash
# Builds kwok v0.8.0 (sigs.k8s.io/kwok/cmd/kwok) from the Go module proxy,
# with the versions its own module pins, into a cache directory keyed by
# this script, with kwok's default node and pod stages beside it as
# stages.yaml (the "fast" set kwokctl gives a cluster: node-initialize,
# node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete, copied
# from kwok's module source), and prints that directory. A second call
# prints it at once. hack/bench-vs-kwok.sh runs kwok from there:
#
#   kwok --kubeconfig=K --config=DIR/stages.yaml \
#     --manage-all-nodes=false \
#     --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
set -euo pipefail

version=v0.8.0

key=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/nodekit/kwokbin"
dir="$cache/$key"

if [ -x "$dir/kwok" ] && [ -s "$dir/stages.yaml" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "building kwok $version into $dir (first time: a few minutes)" >&2
start=$SECONDS
# kwok's own module's versions (it pins k8s.io v0.36 libraries), not the
# repository's: go install pkg@version ignores any go.mod around it.
GOFLAGS= GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$version"
echo "built in $((SECONDS - start))s" >&2

# The default stages, from the module source go install just fetched.
src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$version/kustomize/stage"
{
  for f in node/fast/node-initialize.yaml \
    node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [ -s "$src/$f" ] || { echo "kwokbin: $src/$f not found" >&2; exit 1; }
    echo "---"
    echo "# from sigs.k8s.io/kwok@$version kustomize/stage/$f"
    cat "$src/$f"
  done
} >"$tmp/stages.yaml"
"$tmp/kwok" --version >&2 || true

# Publish atomically: a half-built set is never seen under $dir.
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
  # Another build finished first; use it.
  [ -x "$dir/kwok" ] || { echo "kwokbin: cannot move build into $dir" >&2; exit 1; }
fi
trap - EXIT
rm -rf "$tmp" 2>/dev/null || true
echo "$dir"
