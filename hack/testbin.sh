#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubelet, etcd, kubectl,
# metrics-server, and containerd 2 with its runc shim and a runc new enough
# for ID-mapped mounts (user namespaces) from the Go module proxy into a cache
# directory keyed by the testbin module's go.mod, go.sum and this script, and
# prints that directory. A second call with the same inputs prints it at once.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$root/internal/testbin"
version=v1.37.2
metrics_server=v0.8.0
runc=v1.4.0
major=1
minor=37

key=$(cat "$mod/go.mod" "$mod/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
cache="${NODEKIT_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodekit/testbin}"
dir="$cache/$key"

if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -x "$dir/kubectl" ] \
  && [ -x "$dir/kube-controller-manager" ] && [ -x "$dir/kubelet" ] \
  && [ -x "$dir/metrics-server" ] && [ -x "$dir/containerd" ] \
  && [ -x "$dir/containerd-shim-runc-v2" ] && [ -x "$dir/runc" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$version \
 -X k8s.io/component-base/version.gitMajor=$major \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitVersion=$version \
 -X k8s.io/client-go/pkg/version.gitMajor=$major \
 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

echo "building kube-apiserver, kube-controller-manager, kubelet, etcd and kubectl $version, metrics-server, containerd 2 and runc into $dir (first time: several minutes)" >&2
start=$SECONDS
(
  cd "$mod"
  export CGO_ENABLED=0 GOFLAGS=-mod=mod
  go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  go build -trimpath -ldflags "$ldflags" -o "$tmp/kubectl" k8s.io/kubernetes/cmd/kubectl
  go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
  go build -trimpath -ldflags "$ldflags" -o "$tmp/kubelet" k8s.io/kubernetes/cmd/kubelet
  go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
  # metrics-server with the versions its own module pins: built against the
  # control plane's k8s.io libraries its OpenAPI model names do not match
  # and it stops at start ("cannot find model definition ... NodeMetrics").
  GOFLAGS= GOBIN="$tmp" go install -trimpath -ldflags "-s -w" sigs.k8s.io/metrics-server/cmd/metrics-server@$metrics_server
  # containerd 2 without the snapshotters and plugins that need cgo or kernel
  # features these machines lack; the shim must be static to run from any dir.
  go build -trimpath -tags "no_btrfs no_zfs no_devmapper no_erofs" -ldflags "-s -w" -o "$tmp/containerd" github.com/containerd/containerd/v2/cmd/containerd
  go build -trimpath -ldflags "-s -w" -o "$tmp/containerd-shim-runc-v2" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
  # runc with its own module's versions: Debian's (1.1) has no ID-mapped
  # mounts, so containerd 2 reports no user namespaces for it. Its nsenter
  # is C (cgo); built without the seccomp tag (no libseccomp headers here),
  # so it serves only the runtime handler of pods that ask for no profile.
  GOFLAGS= CGO_ENABLED=1 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" github.com/opencontainers/runc@$runc
)
echo "built in $((SECONDS - start))s" >&2

# Publish atomically: a half-built set is never seen under $dir.
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
  # Another build finished first; use it.
  [ -x "$dir/kube-apiserver" ] || { echo "testbin: cannot move build into $dir" >&2; exit 1; }
fi
trap - EXIT
rm -rf "$tmp" 2>/dev/null || true
echo "$dir"
