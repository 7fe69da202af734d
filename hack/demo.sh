#!/usr/bin/env bash
# make demo: runs examples/agent against a local kube-apiserver and etcd.
#
#   make demo                    # runs until Ctrl-C
#   make demo DEMO_SECONDS=60    # runs 60 s in all, then tears everything down
#   make demo RUNTIME=containerd # insist on a real containerd
#   make demo RUNTIME=private    # a private containerd the demo starts (root)
#   make demo RUNTIME=fake       # the in-memory fake runtime
#
# On a containerd the demo starts itself it also runs pods: a static pod from
# a manifest it writes (with its mirror pod) and an API pod applied with
# kubectl, carrying an HTTP readiness probe; both reach Running and Ready,
# `kubectl get pods -o wide` shows them, `kubectl logs` reads the API pod's
# line through kube-apiserver and the agent's node API, and the API pod is
# then deleted.
#
# The agent serves kubelet's node API (DEMO_PORT), and the real
# metrics-server (started by the local control plane once the agent's
# self-signed certificate exists, registered as the metrics API) scrapes it
# every 15 s: the demo prints `kubectl top node` and, with pods,
# `kubectl top pod`.
#
# Environment:
#   KUBEBUILDER_ASSETS  directory with kube-apiserver, etcd and kubectl
#                       (default: what hack/testbin.sh builds or finds)
#   DEMO_SECONDS        0 (default): run until Ctrl-C; N: stop N seconds after
#                       the agent started (builds and start-up not counted)
#   RUNTIME             empty (default): the system containerd when
#                       /run/containerd/containerd.sock answers, else (as
#                       root) a private containerd, else the fake;
#                       containerd: the system containerd, or else (as root) a
#                       private containerd; private: a private containerd
#                       (root); fake: the fake. The private containerd is the
#                       test harness's (internal/containerdtest), started in
#                       the demo directory with the locally built pause and
#                       busybox images; the demo's pods run only on it.
#   DEMO_HTTP_PORT      host port of the demo's API pod (default 18080)
#   DEMO_PORT           the agent's node API port (default 10250, kubelet's),
#                       which kubectl logs reaches through kube-apiserver
#   DEMO_NODE           node name (default nodekit-demo)
#   DEMO_DIR            working directory (default: a new /tmp/nodekit-demo.*,
#                       removed at the end)
#
# Everything the script starts runs in process groups of its own and is
# stopped, by PID, when the script exits.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEMO_SECONDS=${DEMO_SECONDS:-0}
RUNTIME=${RUNTIME:-}
DEMO_NODE=${DEMO_NODE:-nodekit-demo}
system_sock=/run/containerd/containerd.sock

log() { echo "demo: $*" >&2; }
# table: aligns tab-separated columns.
table() { awk -F'\t' '{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } if (NF > n) n = NF }
  END { for (r = 1; r <= NR; r++) { line = ""; for (i = 1; i <= n; i++) line = line sprintf(i < n ? "%-" w[i] + 2 "s" : "%s", c[r, i]); print line } }'; }
die() { log "$*"; exit 1; }

pids=()        # process groups to stop, newest last
own_dir=""     # demo directory to remove at exit
ctrd_dir=""    # private containerd's directory

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  if [ -n "$ctrd_dir" ]; then
    # Unmount whatever the private containerd left mounted (deepest first).
    awk -v d="$ctrd_dir" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
      while read -r m; do umount -l "$m" 2>/dev/null || true; done
  fi
  if [ -n "$own_dir" ]; then
    rm -rf "$own_dir"
  fi
  exit "$rc"
}

# start_bg NAME CMD...: starts CMD in a process group of its own, logging to
# $dir/NAME.log, and records its PID (which is also the group's ID).
start_bg() {
  local name=$1
  shift
  setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
  pids+=("$!")
  eval "${name//-/_}_pid=$!"
}

# wait_for SECONDS DESCRIPTION CMD...: polls CMD every 0.1 s until it succeeds.
wait_for() {
  local limit=$1 what=$2
  shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.1
  done
}

setup_dir() {
  if [ -n "${DEMO_DIR:-}" ]; then
    dir=$DEMO_DIR
    mkdir -p "$dir"
  else
    dir=$(mktemp -d /tmp/nodekit-demo.XXXXXX)
    own_dir=$dir
  fi
  mkdir -p "$dir/bin"
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

build() {
  if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
    KUBEBUILDER_ASSETS=$("$root/hack/testbin.sh")
  fi
  export KUBEBUILDER_ASSETS
  # kubectl is the test binaries' (the same version as the control plane);
  # they are not put on PATH, where their containerd 2 would shadow the
  # system's 1.6 that the demo's private containerd runs.
  kubectl() { "$KUBEBUILDER_ASSETS/kubectl" "$@"; }
  log "building the agent and the local control plane"
  (cd "$root" &&
    CGO_ENABLED=0 go build -tags grpcnotrace -o "$dir/bin/agent" ./examples/agent &&
    go build -o "$dir/bin/localcluster" ./internal/controlplane/localcluster)
}

start_cluster() {
  log "starting etcd and kube-apiserver (and metrics-server once the agent's certificate exists)"
  start_bg cluster "$dir/bin/localcluster" -dir "$dir" -node "$DEMO_NODE" \
    -metrics-server-kubelet-ca "$dir/pki/kubelet.crt"
  if ! wait_for 180 "control plane" grep -q '^ready ' "$dir/cluster.log"; then
    tail -n 20 "$dir/cluster.log" >&2
    die "the control plane did not start within 180 s (log: $dir/cluster.log)"
  fi
  api_url=$(awk '/^ready /{print $2; exit}' "$dir/cluster.log")
  export KUBECONFIG="$dir/admin.kubeconfig"
  log "control plane ready at $api_url"
}

# containerd_answers SOCKET: true when a containerd serves SOCKET.
containerd_answers() {
  [ -S "$1" ] && command -v ctr >/dev/null 2>&1 && timeout 5 ctr --address "$1" version >/dev/null 2>&1
}

# start_private_containerd: the test harness's containerd (localcontainerd),
# with its root, state, sockets and cgroup root of its own, the locally built
# pause and busybox images imported and a loopback-only CNI configuration (no
# pod networking, but the runtime reports NetworkReady, so the node is
# Ready). It removes everything it made when it stops.
start_private_containerd() {
  [ "$(id -u)" = 0 ] || die "RUNTIME=$RUNTIME: no containerd at $system_sock, and starting one needs root"
  log "checking containerd, runc and busybox-static (hack/containerd-deps.sh)"
  "$root/hack/containerd-deps.sh" >/dev/null
  (cd "$root" && go build -o "$dir/bin/localcontainerd" ./internal/containerdtest/localcontainerd)
  log "starting a private containerd ($(containerd --version | awk '{print $3}')) with the local pause and busybox images"
  start_bg containerd "$dir/bin/localcontainerd" -dir "$dir"
  if ! wait_for 180 containerd grep -q '^ready ' "$dir/containerd.log"; then
    tail -n 20 "$dir/containerd.log" >&2
    die "the private containerd did not start within 180 s (log: $dir/containerd.log)"
  fi
  read -r _ runtime_endpoint busybox_image pod_log_root cgroup_root < <(grep '^ready ' "$dir/containerd.log")
  private_runtime=1
}

choose_runtime() {
  runtime_endpoint=""
  private_runtime=0
  case "$RUNTIME" in
    fake) ;;
    "")
      if containerd_answers "$system_sock"; then
        runtime_endpoint="unix://$system_sock"
      elif [ "$(id -u)" = 0 ]; then
        start_private_containerd
      fi
      ;;
    private) start_private_containerd ;;
    containerd)
      if containerd_answers "$system_sock"; then
        runtime_endpoint="unix://$system_sock"
      else
        start_private_containerd
      fi
      ;;
    *) die "RUNTIME=$RUNTIME: want containerd, private, fake or nothing" ;;
  esac
  if [ -n "$runtime_endpoint" ]; then
    log "runtime: containerd at $runtime_endpoint"
  else
    log "runtime: the in-memory fake (no containerd answers at $system_sock; as root the demo starts one)"
  fi
}

start_agent() {
  local args=(--kubeconfig "$dir/node-$DEMO_NODE.kubeconfig" --hostname-override "$DEMO_NODE"
    --disk-usage-path "$dir" --listen "${DEMO_LISTEN:-127.0.0.1:10248}"
    --port "${DEMO_PORT:-10250}" --cert-dir "$dir/pki" "$@")
  # kube-apiserver's client certificate for node APIs is of this CA.
  args+=(--client-ca-file "$dir/ca.crt")
  if [ -n "$runtime_endpoint" ]; then
    args+=(--container-runtime-endpoint "$runtime_endpoint")
  fi
  if [ "$private_runtime" = 1 ]; then
    # The pod half's files stay in the demo directory; the harness's
    # containerd gives the cgroup root and the pod log root it cleans up.
    mkdir -p "$dir/manifests"
    args+=(--pod-manifest-path "$dir/manifests" --file-check-frequency 1s --root-dir "$dir/root"
      --pod-log-root "$pod_log_root" --cgroup-root "$cgroup_root" --resolv-conf "")
  fi
  log "starting the agent: agent ${args[*]}"
  agent_start=$(date +%s.%N)
  agent_t0=$SECONDS
  start_bg agent "$dir/bin/agent" "${args[@]}"
}

node_ready() {
  [ "$(kubectl get node "$DEMO_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

lease_line() {
  kubectl -n kube-node-lease get lease "$DEMO_NODE" \
    -o jsonpath='{.metadata.name}  holder={.spec.holderIdentity}  duration={.spec.leaseDurationSeconds}s  renewTime={.spec.renewTime}{"\n"}'
}

show() {
  echo
  echo "== kubectl get node -o wide"
  kubectl get node -o wide
  echo
  echo "== conditions of node $DEMO_NODE (DiskUsageHigh is the custom setter's)"
  kubectl get node "$DEMO_NODE" -o jsonpath='{range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\t"}{.message}{"\n"}{end}' | table
  echo
  echo "== capacity / allocatable"
  kubectl get node "$DEMO_NODE" -o go-template='{{range $k, $v := .status.capacity}}{{$k}}{{"\t"}}{{$v}}{{"\t"}}{{index $.status.allocatable $k}}{{"\n"}}{{end}}' |
    (echo -e "RESOURCE\tCAPACITY\tALLOCATABLE"; cat) | table
  echo
  echo "== node lease (renewed every 10 s)"
  lease_line
  sleep 12
  lease_line
  echo
}

# metrics_server_up: the local control plane has said whether metrics-server
# started; ms_state is then ready, unavailable (no binary) or failed.
ms_state=""
metrics_server_up() {
  local line
  line=$(grep -m1 '^metrics-server \(ready\|unavailable\|failed\)' "$dir/cluster.log") || return 1
  case "$line" in
    "metrics-server ready"*) ms_state=ready ;;
    "metrics-server unavailable"*) ms_state=unavailable ;;
    *) ms_state=failed ;;
  esac
}

# top_node, top_pods NAME...: kubectl top has a line for the node, for each
# pod (each try waits a second more when not: kubectl is not free).
top_node() { kubectl top node "$DEMO_NODE" >/dev/null 2>&1 || { sleep 1; false; }; }
top_pods() {
  local listed p
  listed=$(kubectl top pod --no-headers 2>/dev/null | awk '{ print $1 }')
  for p in "$@"; do
    grep -qx "$p" <<<"$listed" || { sleep 1; return 1; }
  done
}

# shown_top: whether show_top printed the node's line already.
shown_top=0

# show_top [POD...]: kubectl top node, once metrics-server has two scrapes
# of the node (15 s apart), and kubectl top pod (the default namespace's
# pods) once the pods given are in it.
show_top() {
  if [ -z "$ms_state" ]; then
    wait_for 90 "metrics-server" metrics_server_up ||
      die "metrics-server not started within 90 s (log: $dir/cluster.log)"
    case "$ms_state" in
      unavailable)
        echo "== kubectl top: no metrics-server in $KUBEBUILDER_ASSETS (make testbin builds it)"
        echo ;;
      failed)
        echo "== kubectl top: metrics-server did not start:"
        grep -A 12 '^metrics-server failed' "$dir/cluster.log" | cut -c1-200
        echo ;;
    esac
  fi
  [ "$ms_state" = ready ] || return 0
  if [ "$shown_top" = 0 ]; then
    local t=$SECONDS
    if ! wait_for 60 "node metrics" top_node; then
      kubectl top node "$DEMO_NODE" >&2 || true
      die "no node metrics within 60 s of waiting (metrics-server scrapes every 15 s; agent log: $dir/agent.log)"
    fi
    echo "== kubectl top node (metrics-server scraping the agent's /metrics/resource every 15 s; waited $((SECONDS - t)) s)"
    kubectl top node "$DEMO_NODE"
    echo
    shown_top=1
  fi
  if [ $# -gt 0 ]; then
    local t=$SECONDS
    if ! wait_for 60 "pod metrics" top_pods "$@"; then
      kubectl top pod >&2 || true
      die "no metrics of pods $* within 60 s (agent log: $dir/agent.log)"
    fi
    echo "== kubectl top pod (waited $((SECONDS - t)) s)"
    kubectl top pod
    echo
  fi
}

# pod_ready NAME: the pod is Running and Ready.
pod_ready() {
  [ "$(kubectl get pod "$1" -o jsonpath='{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = Running/True ]
}

# pods_ready: both demo pods are Running and Ready.
pods_ready() { pod_ready demo-web && pod_ready "demo-static-$DEMO_NODE"; }

# show_pods: a static pod and an API pod with an HTTP readiness probe on the
# private containerd; on any other runtime it says why there are none.
show_pods() {
  echo "== pods"
  if [ "$private_runtime" != 1 ]; then
    if [ -n "$runtime_endpoint" ]; then
      echo "No demo pods: they use the locally built busybox image, imported only into the"
      echo "containerd the demo starts itself (RUNTIME=private, as root)."
    else
      echo "No demo pods: the in-memory fake runtime runs no containers. Pods need containerd:"
      if [ "$RUNTIME" = fake ]; then
        echo "run make demo without RUNTIME=fake, as root (it starts a private containerd)."
      else
        echo "run make demo as root (it starts a private containerd) or with a system containerd."
      fi
    fi
    echo
    return
  fi
  local port=${DEMO_HTTP_PORT:-18080} t
  cat >"$dir/manifests/.demo-static.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: demo-static
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: $busybox_image
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
EOF
  mv "$dir/manifests/.demo-static.yaml" "$dir/manifests/demo-static.yaml"
  echo "static pod: $dir/manifests/demo-static.yaml (mirror pod demo-static-$DEMO_NODE)"
  cat >"$dir/demo-web.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: demo-web
  namespace: default
spec:
  nodeName: $DEMO_NODE
  hostNetwork: true
  dnsPolicy: Default
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 5
  containers:
  - name: web
    image: $busybox_image
    imagePullPolicy: Never
    command: ["sh", "-c", "mkdir -p /www && echo nodekit > /www/index.html && echo serving /www on port $port && trap 'exit 0' TERM; httpd -f -p $port -h /www & wait"]
    ports:
    - containerPort: $port
    readinessProbe:
      httpGet: {path: /, port: $port}
      periodSeconds: 1
EOF
  echo "API pod: kubectl apply -f $dir/demo-web.yaml (busybox httpd on host port $port, HTTP readiness probe)"
  kubectl apply -f "$dir/demo-web.yaml" >/dev/null
  t=$SECONDS
  if ! wait_for 90 "pods Ready" pods_ready; then
    kubectl get pods -o wide >&2 || true
    tail -n 20 "$dir/agent.log" >&2
    die "the demo pods were not Running and Ready within 90 s (agent log: $dir/agent.log)"
  fi
  echo "both pods Running and Ready $((SECONDS - t)) s after the API pod was applied"
  echo
  echo "== kubectl get pods -o wide"
  kubectl get pods -o wide
  echo
  echo "== kubectl logs demo-web (read by kube-apiserver from the agent's node API)"
  kubectl logs demo-web
  echo
  show_top demo-web "demo-static-$DEMO_NODE"
  echo "== kubectl delete pod demo-web"
  t=$SECONDS
  kubectl delete pod demo-web --wait=true --timeout=60s
  echo "deleted in $((SECONDS - t)) s; left:"
  kubectl get pods -o wide
  echo
}

main() {
  setup_dir
  local t0=$SECONDS
  build
  start_cluster
  choose_runtime
  start_agent
  if ! wait_for 30 "node Ready" node_ready; then
    tail -n 20 "$dir/agent.log" >&2
    die "node $DEMO_NODE not Ready within 30 s (agent log: $dir/agent.log)"
  fi
  local ready
  ready=$(awk -v s="$agent_start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
  log "node $DEMO_NODE Ready (seen by kubectl ${ready}s after the agent started; $((SECONDS - t0))s since make demo began)"
  show
  show_top
  show_pods
  echo "Point kubectl at the demo cluster:"
  echo "  export KUBECONFIG=$dir/admin.kubeconfig"
  echo "  kubectl get nodes; kubectl -n kube-node-lease get lease $DEMO_NODE -w"
  echo "Agent: logs $dir/agent.log, metrics http://${DEMO_LISTEN:-127.0.0.1:10248}/metrics"
  if [ "$DEMO_SECONDS" -gt 0 ]; then
    local left=$((DEMO_SECONDS - (SECONDS - agent_t0)))
    if [ "$left" -gt 0 ]; then
      echo "Running $left s more (DEMO_SECONDS=$DEMO_SECONDS), then tearing down."
      sleep "$left" &
      wait $! || true
    fi
  else
    echo "Running until Ctrl-C."
    while kill -0 "$agent_pid" 2>/dev/null; do
      sleep 2 &
      wait $! || true
    done
    log "the agent exited:"
    tail -n 5 "$dir/agent.log" >&2
    exit 1
  fi
  log "done after $((SECONDS - t0)) s; stopping the agent, the control plane and what else was started"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
