#!/usr/bin/env bash
# Provisions what the containerd test harness (internal/containerdtest) needs:
#   - containerd, runc and ctr: installed from Debian's packages when missing
#     and we are root;
#   - the bridge, host-local and loopback CNI plugins (Debian's
#     containernetworking-plugins, in /usr/lib/cni) for pods with their own IPs;
#   - a static busybox binary, unpacked from Debian's busybox-static .deb into
#     ${NODEKIT_CACHE:-$HOME/.cache/nodekit}/busybox/<deb version>/busybox.
# Prints the path of the busybox binary on stdout; everything else goes to
# stderr. Idempotent: a second call finds everything and returns at once.
set -euo pipefail

log() { echo "containerd-deps: $*" >&2; }

cache="${NODEKIT_CACHE:-$HOME/.cache/nodekit}/busybox"
apt_updated=0
apt_update() {
  if [ "$apt_updated" = 0 ]; then
    log "apt-get update"
    apt-get update -qq >&2
    apt_updated=1
  fi
}

missing=()
for bin in containerd runc ctr; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
done
pkgs=()
[ "${#missing[@]}" -gt 0 ] && pkgs+=(containerd runc)
for plugin in bridge host-local loopback; do
  [ -x "/usr/lib/cni/$plugin" ] || { missing+=("cni/$plugin"); pkgs+=(containernetworking-plugins); break; }
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${missing[*]} and not root: install Debian's containerd, runc and containernetworking-plugins packages as root"
    exit 1
  fi
  apt_update
  log "installing ${pkgs[*]} (missing: ${missing[*]})"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
fi

# A busybox already cached (any version; the newest wins) is used as it is,
# without consulting the package lists, so a second call is instant.
cached=$(ls -1d "$cache"/*/busybox 2>/dev/null | sort -V | tail -n 1 || true)
if [ -n "$cached" ] && [ -x "$cached" ]; then
  echo "$cached"
  exit 0
fi

# The candidate version of busybox-static names the cache directory. A colon
# (the epoch separator) is kept out of the path.
candidate() {
  apt-cache policy busybox-static 2>/dev/null | awk '$1 == "Candidate:" { print $2 }'
}
version=$(candidate)
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
  # No package lists yet (a fresh machine): fetch them.
  [ "$(id -u)" = 0 ] || { log "no package lists and not root: cannot find busybox-static"; exit 1; }
  apt_update
  version=$(candidate)
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    log "busybox-static has no candidate version in the package lists"
    exit 1
  fi
fi
dir="$cache/${version//:/_}"
if [ -x "$dir/busybox" ]; then
  echo "$dir/busybox"
  exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.fetch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fetch() { (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "busybox-static=$version" >&2); }
log "fetching busybox-static $version"
if ! fetch; then
  # The lists may be stale; refresh them once and retry with the new candidate.
  [ "$(id -u)" = 0 ] || exit 1
  apt_update
  version=$(candidate)
  dir="$cache/${version//:/_}"
  fetch
fi
deb=$(ls "$tmp"/busybox-static_*.deb)
mkdir -p "$tmp/x"
dpkg-deb -x "$deb" "$tmp/x"
bin="$tmp/x/bin/busybox"
[ -x "$bin" ] || { log "no bin/busybox in $deb"; exit 1; }
mkdir -p "$tmp/out"
cp "$bin" "$tmp/out/busybox"
"$tmp/out/busybox" true || { log "the unpacked busybox does not run"; exit 1; }

# Publish atomically: a partial binary is never seen at $dir/busybox.
if ! mv -T "$tmp/out" "$dir" 2>/dev/null; then
  [ -x "$dir/busybox" ] || { log "cannot move busybox into $dir"; exit 1; }
fi
log "busybox-static $version cached in $dir"
echo "$dir/busybox"
