// Package sidebyside measures a real kubelet and examples/agent on the same
// workload, one after the other, against one control plane and one
// containerd, and prints a Markdown table of both with their ratio
// (nodekit/kubelet). Its only code is a test, TestSideBySide, that runs when
// NODEKIT_BENCH=1 is set; hack/bench-vs-kubelet.sh sets it and is the way to
// run it. Root is needed (the containerd harness, and the kubelet itself).
//
// # Set-up, shared by both nodes
//
//   - The test control plane (internal/controlplane) with an audit log at
//     Metadata level for group system:nodes, from which the requests of one
//     node identity are counted, and the aggregation layer on, for
//     metrics-server.
//   - One containerd (internal/containerdtest) with the loopback-only CNI
//     configuration, so the runtime reports NetworkReady. Every workload pod
//     uses the host network: pod networking is containerd's and CNI's work,
//     the same for both agents, and host-network pods need no bridge, no IP
//     addresses and no NAT left behind. The pod IP, which HTTP probes
//     target, is the node IP (the default-route address).
//   - Per node: its own name, a node-identity kubeconfig
//     (system:node:<name>) pointing at a byte-counting TCP proxy in front of
//     the API server, and a directory for its root dir, pod logs and static
//     pod manifests. Both use the harness's cgroup root (under which each
//     creates its kubepods tree), the cgroupfs driver and no resolv.conf.
//
// The kubelet is $KUBEBUILDER_ASSETS/kubelet (hack/testbin.sh builds
// v1.37.2), run with a KubeletConfiguration written to the node's directory.
// The agent is built from ./examples/agent and run with its equivalent
// flags. Both serve the node API on a free port at the node IP, with bearer
// tokens reviewed by TokenReview and requests authorized by
// SubjectAccessReview (kubelet's authentication.webhook and Webhook
// authorization; the agent's defaults with a kubeconfig), and a
// self-signed serving certificate.
//
// # What is measured, the same way for both
//
//   - start → Node Ready: from starting the process to a watch (admin
//     client) seeing Ready=True, over BENCH_READY_RUNS (3) fresh nodes; the
//     median.
//   - VmRSS after MEASURE_IDLE (2m) idle, then CPU (utime+stime of the
//     process, not of its children) over MEASURE_WINDOW (5m) idle, and the
//     node's API requests (audit log) and bytes each way (proxy) over that
//     window, extrapolated to an hour.
//   - CPU over MEASURE_WINDOW, still idle, while the real metrics-server
//     ($KUBEBUILDER_ASSETS/metrics-server, v0.8.0, through
//     internal/controlplane's StartMetricsServer) scrapes the node's
//     /metrics/resource every 15s with its ServiceAccount token (unverified
//     TLS for both: the kubelet's self-signed certificate names only its
//     host name). The window starts once the metrics API has the node (two
//     scrapes); the node's own kubelet_http_requests_total{path=
//     "metrics/resource"}, read through the API server's node proxy before
//     and after, must show all but one of the window's scrapes, or the
//     node's metrics must still be fresh at its end; metrics-server is
//     stopped after it. The row says n/a when metrics-server is not
//     available or neither holds.
//   - BENCH_PODS (30) pods one at a time: create, Running and Ready, delete
//     with grace 30 (the container exits on TERM at once), gone from the
//     API. Start latency of each, and the node's requests and bytes per
//     lifecycle, less what the idle rate accounts for over the same time.
//   - BENCH_PODS pods created at once: start latency p50 and p99; then all
//     deleted with grace 0, and the times until CRI ListPodSandbox shows
//     none of their sandboxes ready, and none at all.
//   - BENCH_PODS pods with an HTTP readiness probe and an exec liveness
//     probe (default periods, 10s): CPU over MEASURE_WINDOW once all are
//     Ready, and VmRSS at its end.
//   - BENCH_DATA_PODS (5) pods that each mount one ConfigMap and one
//     Secret (shared by all) and a projected service-account token, and
//     take an env var from the ConfigMap: the node's requests and bytes
//     per pod from their creation to all Running and Ready (the idle rate
//     taken off), and its requests per pod per hour over MEASURE_WINDOW
//     while they run (all but those of its Lease and Node).
//   - A static pod, BENCH_STATIC_RUNS (5) times, one after the other: from
//     renaming its manifest into the manifest directory to the mirror pod
//     appearing in a watch, and to the mirror pod being reported Running;
//     the medians.
//
// Both run with their defaults otherwise: the kubelet with its iptables
// utility chains and its once-a-minute container garbage collection (which
// is when it removes the stopped sandboxes of deleted pods), the agent with
// its 24Mi soft memory limit for the Go runtime (--memory-limit).
//
// Start latency runs from just before the client's create call (a pod's
// creationTimestamp has a resolution of one second) to the watch seeing the
// pod Running with Ready=True.
//
// # Clean-up
//
// After each node is stopped (SIGTERM to its process group, SIGKILL after
// 10s) everything it left is removed, also when the test fails: every pod
// sandbox in containerd, the kubepods cgroups below the harness's cgroup
// root in every hierarchy, mounts under its directory (the kubelet makes its
// root dir a shared bind mount), the /var/log/containers links into its log
// directory, /var/lib/kubelet when it did not exist before (the kubelet's
// device-plugin socket lives there whatever the root dir), the iptables
// chains KUBE-* that appeared (the kubelet's KUBE-FIREWALL,
// KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT, with the rules jumping to them),
// and the kernel tunables the kubelet may set are put back. Whatever still
// differs fails the test. The control plane and containerd are stopped last;
// containerdtest removes its cgroups, mounts and directory.
//
// An interrupt (SIGINT or SIGTERM) ends the run through the test's context,
// so the clean-ups run. A test process that is killed outright (SIGKILL, or
// go test's -timeout, which the script sets well above the test's own
// deadline) takes the node process with it (Pdeathsig) but leaves what
// containerdtest's documentation lists, and the kubelet's iptables chains.
package sidebyside
