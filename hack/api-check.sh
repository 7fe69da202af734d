#!/usr/bin/env bash
# Holds the exported API to the last release: fails when an exported
# identifier of a public package (every package but internal/ and examples/
# ones; the <pkg>test fakes are public) was removed, renamed or changed
# incompatibly since the release whose API is in $baseline and CHANGELOG.md
# does not name it as pkg.Identifier (podsync.NewCRI,
# heartbeat/fleet.Options.Nodes, podsync.Manager.Trigger for a method of
# *Manager; a removed package by its path: podsync/foo) between its first
# "## " heading and that release's heading. Additions need no entry.
# internal/apicheck (a module of its own, on golang.org/x/exp/apidiff) does
# the work; its package documentation gives the matching rule in full.
#
#   hack/api-check.sh                # check the working tree
#   hack/api-check.sh --write [REV]  # write the baseline again from commit
#                                    # REV (default: the one in its SOURCE)
#
# --write takes the source from git, not from the working tree, so the
# baseline is the same whoever writes it; `hack/api-check.sh --write &&
# git diff --exit-code internal/apicheck` shows that it is. At the next
# release: tag it, point $baseline at internal/apicheck/<tag>, run
# `hack/api-check.sh --write <tag>`, and move the CHANGELOG's entries under
# the tag's heading.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
baseline=internal/apicheck/v0.1.0
export GOWORK=off

case "${1:-}" in
"" | --write) ;;
*)
  echo "usage: hack/api-check.sh [--write [REV]]" >&2
  exit 2
  ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/nodekit-api.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$root/internal/apicheck" && go build -o "$tmp/apicheck" .)
tool=("$tmp/apicheck" -baseline "$root/$baseline")

if [ -z "${1:-}" ]; then
  "${tool[@]}" -root "$root"
  exit
fi

rev=${2:-$(cat "$root/$baseline/SOURCE" 2>/dev/null || true)}
[ -n "$rev" ] || { echo "api-check: --write needs a commit (no $baseline/SOURCE)" >&2; exit 2; }
commit=$(git -C "$root" rev-parse --verify "$rev^{commit}")
mkdir "$tmp/src"
git -C "$root" archive "$commit" | tar -x -C "$tmp/src"
"${tool[@]}" -root "$tmp/src" -write
echo "$commit" >"$root/$baseline/SOURCE"
