#!/usr/bin/env bash
# Runs the same pods on a real kubelet v1.37.2 node and on an examples/agent
# node, one after the other, against one test control plane and one
# containerd (root needed), for containerd 1.6 and 2, and prints for each pod
# whose status differs the differing fields (JSON path: kubelet value vs
# agent value), then a Markdown table: scenario, runtime, same / accepted /
# different. Timestamps, container and image IDs, restart counts past 1, pod
# IPs (the node's, the pod network's) and IDs in messages are normalised
# first; "accepted" rows differ only where nodekit differs on purpose (a
# "Differences from the kubelet" section says why). The scenarios are in
# internal/sidebyside/scenarios_test.go; FIDELITY.md has the last run.
#
#   hack/pod-status-diff.sh                          # both runtimes: about 6 minutes
#   STATUS_DIFF_RUNTIMES=2 hack/pod-status-diff.sh   # containerd 2 only
#   STATUS_DIFF_ONLY='^init-' hack/pod-status-diff.sh  # some scenarios (a regexp)
#
# Knobs: STATUS_DIFF_RUNTIMES (1,2: the containerd major versions, in order),
# STATUS_DIFF_ONLY (a regexp over scenario names), STATUS_DIFF_REPORT_ONLY=1
# (print, do not fail on differences). It exits non-zero when a scenario
# differs in a way not accepted, or a node could not be cleaned up after.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "pod-status-diff: needs root (the kubelet and the containerd harness)" >&2; exit 1; }
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$(hack/testbin.sh)
fi
export KUBEBUILDER_ASSETS
hack/containerd-deps.sh >/dev/null

logs=$(mktemp -d /tmp/nodekit-status-diff.XXXXXX)
out="$logs/test.log"
echo "pod-status-diff: full output and the nodes' logs in $logs" >&2
rc=0
BENCH_LOG_DIR="$logs" NODEKIT_STATUS_DIFF=1 go test -count=1 -timeout 60m \
  -run '^TestPodStatusDiff$' -v ./internal/sidebyside/ >"$out" 2>&1 || rc=$?
grep '^DIFF ' "$out" | sed 's/^DIFF //' || true
echo
grep '^|' "$out" || true
if [ "$rc" != 0 ]; then
  echo >&2
  grep -E -- '--- FAIL|^\s+\S+_test.go:[0-9]+:' "$out" | tail -n 40 >&2 || true
  echo "pod-status-diff: failed (exit $rc); see $out" >&2
fi
exit "$rc"
