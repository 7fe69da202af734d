// Package nodeapi serves kubelet's node API as an http.Handler: /healthz,
// /pods, /stats/summary, /metrics/resource, /metrics,
// /containerLogs/<namespace>/<pod>/<container>, and the streaming /exec,
// /attach, /portForward and /run, carried out by the container runtime,
// and the Go profiles under /debug/pprof/ (as the kubelet's
// enableProfilingHandler, on unless Options.DisableProfiling); and a Server that serves it as kubelet serves its port 10250: over TLS,
// with client certificates, TokenReview and SubjectAccessReview.
//
// It serves what the pod half runs: its pods, their containers' log files
// in the layout podsync writes them (podsync.PodLogDir) and their usage as
// nodestatus/usage samples it; a simulated node gives its own Stats and
// Options.Logs (podsync/podsynctest/simapi), and one Server can serve many
// nodes (AuthOptions.NodeNameFrom). Nothing below it imports it.
//
// # Usage
//
// With a pod half on podsync/cri/backend (examples/criagent has it whole),
// Port puts the Handler behind the Server for the pod half:
//
//	ln, _ := net.Listen("tcp", ":10250")
//	port, _ := nodeapi.NewPort(nodeapi.PortOptions{NodeName: node, Listener: ln,
//		Pods:    pods, // *nodekit.PodHalf
//		Handler: nodeapi.Options{Stats: be.Usage(), Runtime: rt},
//		Server: nodeapi.ServerOptions{CertDir: "/var/lib/kubelet/pki", // or CertFile and KeyFile
//			Auth: nodeapi.AuthOptions{TokenReviews: client.TokenReviews(),
//				SubjectAccessReviews: client.SubjectAccessReviews()}}})
//	err := port.Run(ctx)
//
// New and NewServer are the two halves of it, for an agent of its own.
// The Handler alone has no authentication or authorization: serve it
// through Server, or put Auth.Wrap in front of it.
//
// Streaming paths ask the runtime (CRI Exec, Attach, PortForward) for a URL
// on its streaming server and proxy the client's upgraded connection (SPDY
// or WebSocket) there, as kubelet does. Pods and containers are found as
// kubelet finds them, with kubelet's messages and status codes. Server
// serves TLS from files it reloads when they change on disk, a
// kubelet-serving certificate (RequestServingCertificate,
// RenewServingCertificate: renewed at 70–90% of its validity) or a
// self-signed one; Auth authenticates and authorizes in kubelet's order,
// with kubelet's attribute mapping (Attributes) and caches.
//
// # Timing
//
// Stats paths read a published snapshot and never wait on I/O. A followed
// log is polled every Options.FollowInterval (1s) on Options.Clock. TLS
// files and the client CA bundle are checked at handshakes and re-read on a
// change, and at least every ReloadResync (1m). Review answers are cached
// (authentication 2m, allowed 5m, denied 30s, at most 4096 entries each);
// a transiently failing review is retried with kubelet's webhook back-off
// within ReviewTimeout (10s). On shutdown requests in flight get
// ShutdownGrace (5s).
//
// # Limits
//
// No front-proxy (request header) authentication; a serving certificate's
// request is polled, not watched; no metrics of reviews, decisions or
// streaming sessions. No /stats/ container queries, /metrics/cadvisor or
// /metrics/probes; no ephemeral-container creation; no streaming idle
// timeout or byte rate limit. Rotated log files of the current run are not
// read back (as kubelet, only the live file). Cost figures (binary size,
// exec round trips, authentication) are in BENCHMARKS.md.
//
// # Differences from the kubelet
//
//   - Pod, container or sandbox not found is 404 with kubelet's message
//     (kubelet answers 500); a streaming request that is not an upgrade is
//     400 "Upgrade request required" before the runtime is asked.
//   - WebSocket clients are proxied to the runtime as they come; kubectl's
//     v5.channel.k8s.io WebSockets are not translated to SPDY
//     (ExtendWebSocketsToKubelet), so a node built on this package must not
//     declare that feature: the API server then translates.
//   - AuthOptions.UpgradeRequiresCreate (off by default, kubelet's way)
//     makes a WebSocket upgrade need create rather than get.
//   - The proxy, Server and Auth are the package's own, not apimachinery's
//     UpgradeAwareHandler or k8s.io/apiserver's delegating authenticator
//     and authorizer, which would more than double a small agent's size.
//   - TLS files are re-read when a stat shows them changed, not through
//     inotify.
package nodeapi
