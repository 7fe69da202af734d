#!/usr/bin/env bash
# Soak for leaks: runs examples/agent's TestAgentLeaksNothingOverPodCycles
# with NODEKIT_LEAK_CYCLES pod create/delete cycles (1,000 by default), ten at
# a time, on the test harness's containerd 1.x and containerd 2 in parallel
# (an agent and a node each) and control plane (root needed), and prints the
# agents' and the machine's footprint after a first round (the baseline),
# ten times on the way (from 500 cycles) and after the cycles. The test
# fails if the machine's cgroups, mounts, network namespaces, log files or
# pod directories differ, if an agent's goroutines or open files grew by
# more than 2, or if its heap grew past 1.5x + 12 MiB (room for the event
# recorder's bounded caches).
#
#   hack/soak-leaks.sh                          # about 9 minutes
#   NODEKIT_LEAK_CYCLES=100 hack/soak-leaks.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$(hack/testbin.sh)
fi
export KUBEBUILDER_ASSETS
[ "$(id -u)" = 0 ] || { echo "soak-leaks: needs root (the containerd harness)" >&2; exit 1; }
hack/containerd-deps.sh >/dev/null

export NODEKIT_LEAK_CYCLES=${NODEKIT_LEAK_CYCLES:-1000}
out=$(mktemp /tmp/nodekit-soak.XXXXXX.log)
echo "soak-leaks: $NODEKIT_LEAK_CYCLES cycles; full output in $out" >&2
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
NODEKIT_REQUIRE_ALL=1 go test -count=1 -timeout 3h \
  -run '^TestAgentLeaksNothingOverPodCycles$' -v ./examples/agent >"$out" 2>&1 || status=$?
grep -E '^LEAKS |cycles, .* at a time' "$out" | sed 's/^LEAKS //; s/^ *leak_e2e_test.go:[0-9]*: //'
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$status" != 0 ]; then
  tail -n 40 "$out" >&2
fi
exit "$status"
