#!/usr/bin/env bash
# Runs the same pod workload on kwok v0.8.0 and then on examples/fleet's
# hollow nodes (--pods default), one after the other, each against a test
# control plane of its own, and prints a Markdown table per workload with both and
# their ratio (fleet/kwok). internal/kwokbench's package documentation says
# what is measured and how.
#
#   hack/bench-vs-kwok.sh                                          # 1000x10000 and 100x10000
#   KWOK_BENCH_WORKLOADS=10x100 KWOK_BENCH_HOLD=5s hack/bench-vs-kwok.sh   # a smoke run
#
# Knobs: KWOK_BENCH_WORKLOADS (1000x10000,100x10000: NODESxPODS, comma-
# separated), KWOK_BENCH_HOLD (60s: all pods Running), KWOK_BENCH_CLIENTS (32:
# goroutines creating and deleting the pods), KWOK_BENCH_SIMS (kwok,fleet),
# KWOK_BENCH_TIMEOUT (100m: the whole run), KWOK_BENCH_PHASE_TIMEOUT (10m:
# each wait), KWOK_BENCH_LOG_DIR (where the simulators' logs are kept; default
# beside the test's output). The first run builds kube-apiserver and etcd (hack/testbin.sh)
# and kwok (hack/kwokbin.sh) into caches; later runs reuse them. On a shared
# machine the figures are only as good as the machine is quiet: the load
# average is printed at the start and the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS=$(hack/testbin.sh)
fi
export KUBEBUILDER_ASSETS
KWOK_BIN_DIR=$(hack/kwokbin.sh)
export KWOK_BIN_DIR

logs=$(mktemp -d /tmp/nodekit-kwokbench.XXXXXX)
out="$logs/test.log"
export KWOK_BENCH_LOG_DIR="${KWOK_BENCH_LOG_DIR:-$logs}"
echo "bench-vs-kwok: full output in $out, the simulators' logs in $KWOK_BENCH_LOG_DIR" >&2
NODEKIT_BENCH=1 go test -count=1 -timeout 2h -run '^TestBenchVsKwok$' -v ./internal/kwokbench >"$out" 2>&1 || {
  tail -n 60 "$out" >&2
  exit 1
}
grep -E '^(\||load average|[0-9]+ nodes, )' "$out" | sed 's/^\([0-9]* nodes, \)/\n\1/'
