#!/usr/bin/env bash
# Measures the pod half (podsource's API source → podsync's Engine on a real
# containerd with probe.Manager → podsync/status's Writer, as
# system:node:<name> under NodeRestriction) on the test control plane:
# start latency of MEASURE_PODS (30) pods one at a time and at once, the time
# from deleting them with grace 0 to a runtime without sandboxes, and the
# node's API requests and bytes per pod lifecycle. Root needed (the
# containerd harness). No race detector: the figures are the library's.
#
#   hack/measure-pods.sh            # about a minute
#   MEASURE_PODS=10 hack/measure-pods.sh
#   MEASURE_PARALLEL=4,16,30 hack/measure-pods.sh   # containerd alone at
#                                     # several parallelisms (default 16)
#   MEASURE_RUNNING=250 hack/measure-pods.sh   # the pod half's figures with
#                                     # 250 more pods running (every other
#                                     # one probed), as on a full node
#
# It prints a Markdown table and the load average before and after: on a
# shared machine the times are only as good as the machine is quiet.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$(hack/testbin.sh)
fi
export KUBEBUILDER_ASSETS
[ "$(id -u)" = 0 ] || { echo "measure-pods: needs root (the containerd harness)" >&2; exit 1; }

# -p 1: the pod half's figures and containerd's alone one after the other,
# never on the same two CPUs at once.
out=$(mktemp /tmp/nodekit-measure-pods.XXXXXX.log)
echo "measure-pods: full output in $out" >&2
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
NODEKIT_MEASURE=1 NODEKIT_REQUIRE_ALL=1 go test -p 1 -count=1 -timeout 20m \
  -run '^(TestMeasureRuntime|TestMeasurePods)$' -v . ./podsync/cri/ >"$out" 2>&1 || {
  tail -n 40 "$out" >&2
  exit 1
}
grep '^|' "$out"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
