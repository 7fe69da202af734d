#!/usr/bin/env bash
# Runs the same workload on a real kubelet v1.37.2 node and on an
# examples/agent node, one after the other, against one test control plane
# and one containerd (root needed), and prints a Markdown table of both with
# their ratio (nodekit/kubelet). internal/sidebyside's package documentation
# says what is measured and how, and what is cleaned up after each node.
#
#   hack/bench-vs-kubelet.sh                 # the full run: about 50 minutes
#   BENCH_PODS=5 MEASURE_IDLE=5s MEASURE_WINDOW=10s BENCH_READY_RUNS=1 \
#     hack/bench-vs-kubelet.sh               # a smoke run: 3-5 minutes
#
# (The smoke run's windows are too short for its idle figures to mean
# anything; it checks that everything runs and is cleaned up. The kubelet's
# row for grace-0 clean-up waits for its once-a-minute garbage collection,
# which makes up to a minute of the smoke run's time.)
#
# Knobs: BENCH_PODS (30), BENCH_READY_RUNS (3), MEASURE_IDLE (2m),
# MEASURE_WINDOW (5m), BENCH_STATIC_RUNS (5), BENCH_DATA_PODS (5), BENCH_ONLY
# (kubelet or nodekit: one column).
# It prints the load average before and after: on a shared machine the
# figures are only as good as the machine is quiet.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "bench-vs-kubelet: needs root (the kubelet and the containerd harness)" >&2; exit 1; }
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$(hack/testbin.sh)
fi
export KUBEBUILDER_ASSETS
hack/containerd-deps.sh >/dev/null

logs=$(mktemp -d /tmp/nodekit-bench.XXXXXX)
out="$logs/test.log"
echo "bench-vs-kubelet: full output and the nodes' logs in $logs" >&2
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
BENCH_LOG_DIR="$logs" NODEKIT_BENCH=1 go test -count=1 -timeout 90m \
  -run '^TestSideBySide$' -v ./internal/sidebyside/ >"$out" 2>&1 || {
  tail -n 60 "$out" >&2
  exit 1
}
grep '^|' "$out"
echo
grep '^BENCH ' "$out" | sed 's/^BENCH //'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
