#!/usr/bin/env bash
# Measures what CRI container events save: examples/agent with MEASURE_PODS
# (100) running host-network pods, first on the host's containerd 1.6 (no
# container events: the agent relists every 1s), then on containerd 2 from
# the test binaries (events: a full relist every 5m), each with its own
# node on the test control plane. Prints the agent's and containerd's CPU
# over MEASURE_WINDOW (2m), taken MEASURE_SETTLE (30s) after all pods are
# Running, side by side with their ratio, and the load average before and
# after: on a shared machine the figures are only as good as the machine
# is quiet. Root needed (the containerd harness).
#
#   hack/measure-events.sh                              # about 10 minutes
#   MEASURE_PODS=20 MEASURE_SETTLE=10s MEASURE_WINDOW=30s hack/measure-events.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$(hack/testbin.sh)
fi
export KUBEBUILDER_ASSETS
[ "$(id -u)" = 0 ] || { echo "measure-events: needs root (the containerd harness)" >&2; exit 1; }
hack/containerd-deps.sh >/dev/null

out=$(mktemp /tmp/nodekit-measure-events.XXXXXX.log)
echo "measure-events: full output in $out" >&2
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
NODEKIT_MEASURE=1 NODEKIT_REQUIRE_ALL=1 go test -count=1 -timeout 60m \
  -run '^TestMeasureEventsCPU$' -v ./examples/agent >"$out" 2>&1 || {
  tail -n 40 "$out" >&2
  exit 1
}
grep '^MEASURE ' "$out" | sed 's/^MEASURE //'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
