#!/usr/bin/env bash
# Runs the same workload on a real kubelet v1.37.2 node and on an
# examples/agent node, one after the other, against one test control plane
# and one containerd (root needed), and prints a Markdown table of both with
# their ratio (nodekit/kubelet), with the floor under each runtime and
# API row (the same work with no agent, measured first in the same run) and
# the ratio nodekit/floor. internal/sidebyside's package documentation says
# what is measured and how, and what is cleaned up after each node.
#
#   hack/bench-vs-kubelet.sh                 # the full run: 80 minutes to over 2 hours
#   BENCH_PODS=5 MEASURE_IDLE=5s MEASURE_WINDOW=10s BENCH_READY_RUNS=1 \
#     BENCH_STATIC_RUNS=1 BENCH_DATA_PODS=1 BENCH_DENSITY=10 \
#     MEASURE_DENSITY_WINDOW=10s BENCH_PROFILE_SECONDS=1 BENCH_SETTLE_LOAD=0 \
#     hack/bench-vs-kubelet.sh   # a smoke run: 3-6 minutes
#
# (The smoke run's windows are too short for its idle figures to mean
# anything; it checks that everything runs and is cleaned up. The kubelet's
# rows for grace-0 clean-up (BENCH_PODS pods, and each density size) wait
# for its once-a-minute garbage collection, up to a minute each of the
# smoke run's time: 51 s of the 5m32s a smoke run took on a machine whose
# containerd started pods three to four times slower than usual.)
#
# Knobs: BENCH_PODS (30), BENCH_READY_RUNS (3), MEASURE_IDLE (2m),
# MEASURE_WINDOW (5m), BENCH_STATIC_RUNS (5), BENCH_DATA_PODS (5), BENCH_ONLY
# (kubelet or nodekit: one column), BENCH_DENSITY (110,250: the density
# phase's pod counts, comma-separated, each run on both nodes; 0 for none;
# both nodes get maxPods 110 or the largest count + 10, whichever is more),
# MEASURE_DENSITY_WINDOW (5m: the CPU window with the density pods running),
# BENCH_PROFILE_SECONDS (30: each density size's CPU profile of both nodes,
# taken with their heap profiles after the window; 0 for none),
# BENCH_AGENT_ARGS (more flags for the agent, such as --memory-limit=0),
# BENCH_SETTLE_LOAD (3: each node and density size first waits, up to 5
# minutes, for the one-minute load average to fall to it; 0 for no wait).
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
BENCH_LOG_DIR="$logs" NODEKIT_BENCH=1 go test -count=1 -timeout 180m \
  -run '^TestSideBySide$' -v ./internal/sidebyside/ >"$out" 2>&1 || {
  tail -n 60 "$out" >&2
  exit 1
}
grep '^|' "$out"
echo
grep '^BENCH ' "$out" | sed 's/^BENCH //'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
