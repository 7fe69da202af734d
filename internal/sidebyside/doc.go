// Package sidebyside measures a real kubelet and examples/agent on the same
// workload, one after the other, against one control plane and one
// containerd, and prints a Markdown table of both with their ratio
// (nodekit/kubelet). Its only code is a test, TestSideBySide, that runs when
// NODEKIT_BENCH=1 is set; hack/bench-vs-kubelet.sh sets it and is the way to
// run it. Root is needed (the containerd harness, and the kubelet itself).
//
// # Set-up, shared by both nodes
//
// The test control plane (internal/controlplane) with an audit log of group
// system:nodes, from which one node identity's requests are counted, and
// the aggregation layer on, for metrics-server. One containerd
// (internal/containerdtest) with a loopback-only CNI configuration; every
// workload pod uses the host network, so the pod IP HTTP probes target is
// the node IP. Per node: its own name, a system:node:<name> kubeconfig
// pointing at a byte-counting proxy in front of the API server, and its own
// directory; both use the harness's cgroup root and the cgroupfs driver.
// The kubelet is $KUBEBUILDER_ASSETS/kubelet (v1.37.2, built by
// hack/testbin.sh) with a KubeletConfiguration; the agent is built from
// ./examples/agent with equivalent flags. Both serve the node API with
// TokenReview and SubjectAccessReview and a self-signed certificate, the
// same maxPods (110, or the largest BENCH_DENSITY size + 10), a 40s lease
// and a 5m nodeStatusReportFrequency, and their defaults otherwise.
//
// # What is measured, the same way for both
//
//   - start → Node Ready, over BENCH_READY_RUNS (3) fresh nodes; the median.
//   - VmRSS after MEASURE_IDLE (2m) idle; CPU, API requests and bytes over
//     MEASURE_WINDOW (5m) idle, extrapolated to an hour. A window of the
//     status report period (5m) or more starts midway between two of the
//     node's status reports (seen in a watch of its Node) and lasts its
//     whole number of periods, so that it holds one report per period for
//     both nodes (a window from an arbitrary point holds one or none, none
//     for the kubelet when its period, checked every 10s, runs a few
//     seconds over 5m), each report with everything it sets off (its
//     answer, the node's own watch event of its Node), far from both ends;
//     a shorter one is taken as it comes. The idle bytes received are also
//     listed by arrival (sampled every 50ms) and the node's Lease and Node
//     sizes given, to tell renewals, reports, watch bookmarks and restarts
//     apart.
//   - CPU over MEASURE_WINDOW while the real metrics-server scrapes
//     /metrics/resource every 15s (n/a when it is missing or its scrapes
//     cannot be confirmed from the node's kubelet_http_requests_total).
//   - BENCH_PODS (30) pods one at a time: start latency, requests and bytes
//     per lifecycle (the idle rate taken off).
//   - BENCH_PODS pods at once: start latency p50 and p99; deleted with grace
//     0, the times until CRI shows none of their sandboxes ready, and none.
//   - BENCH_PODS probed pods (HTTP readiness, exec liveness): CPU over
//     MEASURE_WINDOW and VmRSS.
//   - BENCH_DATA_PODS (5) pods with a ConfigMap, a Secret and a token:
//     requests per pod to Running and per pod-hour.
//   - A static pod, BENCH_STATIC_RUNS (5) times: to the mirror pod in a
//     watch, and to Running; the medians.
//   - Density, for each size N of BENCH_DENSITY (110,250; 0 for none): N
//     pods created at once (8 creates in flight), every other one probed
//     as above (its Ready waits for a successful readiness probe); the
//     time from the first create to all Running and Ready, and each pod's
//     p50 and p99, and, as lines of the output, the node's CPU from just
//     before the first create to all Ready, with the API server's, etcd's
//     and the machine's busy share over the same span, the pod worker
//     syncs and the CRI calls it made in that time
//     (kubelet_pod_worker_duration_seconds and
//     kubelet_runtime_operations_duration_seconds on both, by operation
//     type, with their mean; the floor's CRI calls are timed the same way)
//     and, with BENCH_PROFILE_SECONDS, a CPU profile of the start's first
//     seconds; with them running, CPU over MEASURE_DENSITY_WINDOW (5m)
//     and VmRSS, and, as a line of the output, the runtime's CPU over the
//     same window (containerd's, its shims' own, and that of the runc
//     processes the shims waited for: starts, stops and exec probes) and
//     the processes the machine started a second;
//     10 more plain pods one at a time on top (N+10 pods: maxPods allows
//     them); the events recorded for the phase's pods by type and reason
//     (a warning's message by its first and last part), with repeats; then
//     all deleted with grace 0, to no sandbox in CRI. After
//     the CPU window (so outside it), the node's heap profile and a CPU
//     profile of BENCH_PROFILE_SECONDS (30; 0 for none) are read through
//     the API server's node proxy from /debug/pprof/ on the node API,
//     served by both (the kubelet's enableProfilingHandler, on by
//     default), written to BENCH_LOG_DIR and summarised (go tool pprof
//     -top) in the output.
//
// BENCH_AGENT_ARGS adds flags to the agent's command line (for example
// --memory-limit=0, to measure without the Go runtime's soft limit).
//
// Each node, and each density size on it, first waits up to 5 minutes for
// the one-minute load average to fall to BENCH_SETTLE_LOAD (3; 0 for no
// wait), so that it does not begin in the load the floor's or the other
// node's pods left; the output says how long each waited. The density
// phase waits for its deletions up to 2 minutes plus 3 s a pod (the
// kubelet removes deleted pods' sandboxes in its once-a-minute garbage
// collection, one after another); sandboxes still listed then are a note
// and n/a in the table, not a failed run, and the node's clean-up removes
// them.
//
// Start latency runs from just before the create call to a watch seeing
// the pod Running with Ready=True. The latest figures are in README.md and
// BENCHMARKS.md, earlier runs in BENCHMARKS-HISTORY.md.
//
// # Floors
//
// Before the first node starts, the same run measures what no agent can
// beat, printed as the floor column with nodekit/floor (empty where a row
// has none). The runtime rows (one at a time, BENCH_PODS at once, density,
// deletions with grace 0): the same pods (busybox, host network, the
// command; no probes but in the density rows), their configs carrying
// what both nodes' carry (AsNodesSend: the sandbox's RuntimeDefault
// seccomp profile, the containers' /etc/hosts and termination-log mounts,
// BestEffort's resources), straight over CRI with
// runtime/remote, no agent, by StartPods (RunPodSandbox, CreateContainer,
// StartContainer, then the pod's Started) and
// RemovePods (StopPodSandbox, RemovePodSandbox), this package's exported
// workload, which podsync/cri's TestMeasureRuntime runs too. Pods start
// podsync.DefaultMaxParallel (16) at a time, the agent's engine's bound,
// and stop all at once, as the engine does not bound stopping. The density
// rows run the nodes' workload: every other pod serves HTTP (busybox's
// httpd on a port of the host) and is ready when a GET of it answers
// (polled every 100ms from its container's start, its slot given back),
// and its exec liveness probe ("true", timeout 1s) runs over CRI every
// 10s from a random point of the first period, from its start until the
// pods are removed, so through the next pods' starts too; the floor's
// report line gives its all-started time beside the all-ready one. The mirror
// pod row: a create of an equivalent mirror pod as a node identity with no
// agent, timed from the call until the bench's watch of the node's pods
// sees it, as the row is. Idle requests: 3600/(40/4) lease renewals plus 3600/300
// status reports, 372 an hour, from the configured values. Idle bytes
// received: a renewal's response on the wire (TLS included; the median of
// 10 updates of that identity's Lease, protobuf, as both nodes renew) ×
// the renewals an hour.
//
// # The pod status differential
//
// TestPodStatusDiff (NODEKIT_STATUS_DIFF=1; hack/pod-status-diff.sh) uses
// the same set-up and node code with a bridge CNI network
// (containerdtest's EnableBridge), once per containerd asked for
// (STATUS_DIFF_RUNTIMES, "1,2"): the scenario pods (scenarios_test.go: the
// restart policies × exit codes, init containers, a sidecar, probes,
// termination messages, env expansion, QoS classes, OOM, a missing image,
// host network, an active deadline, a graceful deletion, security
// contexts) are created at once on a kubelet node, each recorded with its
// event reasons once its own condition has held with the status steady
// (or at its deadline), deleted, and the node stopped and cleaned up; then
// the same on an agent node. It prints the fields that differ after
// normalising what timing decides and a table scenario/runtime/result;
// differences nodekit makes on purpose (acceptedDiffs, each named in a
// "Differences from the kubelet" section) are "accepted". FIDELITY.md at
// the repository root has the last run.
//
// # Clean-up and limits
//
// After each node is stopped (SIGTERM to its process group, SIGKILL after
// 10s) everything it left is removed, also when the test fails: pod
// sandboxes (when the runtime refuses to remove some within a minute,
// the processes below the kubepods cgroups are killed and, if that is not
// enough, the shims, each followed by another try: containerd 1.6 keeps a
// container whose start timed out as a running task),
// kubepods cgroups, mounts under its directory, /var/log/containers
// links, /var/lib/kubelet when it did not exist before, the KUBE-* iptables
// chains that appeared, and kernel tunables; whatever still differs fails
// the test. An interrupt ends the run through the test's context, so the
// clean-ups run. A test process killed outright takes the node process with
// it (Pdeathsig) but leaves what containerdtest's documentation lists, and
// the kubelet's iptables chains.
package sidebyside
