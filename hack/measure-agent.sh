#!/usr/bin/env bash
# Measures examples/agent on a real containerd (started by the test harness,
# root needed) and the test control plane: time from start to Node Ready,
# VmRSS after MEASURE_IDLE (2m) idle, CPU over MEASURE_WINDOW (5m) idle, and
# API writes and request bytes per idle hour (the agent's own request
# counters, extrapolated from the window). The agent runs with kubelet's lease
# timing: 40 s duration, renewed every 10 s.
#
#   hack/measure-agent.sh                            # about 8 minutes
#   MEASURE_IDLE=30s MEASURE_WINDOW=1m hack/measure-agent.sh
#
# It prints the figures (lines starting with MEASURE) and the load average
# before and after: on a shared machine, CPU figures are only as good as the
# machine is quiet.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$(hack/testbin.sh)
fi
export KUBEBUILDER_ASSETS
[ "$(id -u)" = 0 ] || { echo "measure-agent: needs root (the containerd harness)" >&2; exit 1; }
hack/containerd-deps.sh >/dev/null

out=$(mktemp /tmp/nodekit-measure.XXXXXX.log)
echo "measure-agent: full output in $out" >&2
NODEKIT_MEASURE=1 NODEKIT_REQUIRE_ALL=1 go test -count=1 -timeout 40m \
  -run '^TestMeasureFootprint$' -v ./examples/agent >"$out" 2>&1 || {
  tail -n 40 "$out" >&2
  exit 1
}
grep '^MEASURE ' "$out" | sed 's/^MEASURE //'
