// Package nodeapi serves kubelet's node API as an http.Handler: /healthz,
// /pods, /stats/summary, /metrics/resource, /metrics,
// /containerLogs/<namespace>/<pod>/<container>, and the streaming /exec,
// /attach, /portForward and /run, carried out by the container runtime;
// and a Server that serves it as kubelet serves its port 10250: over TLS,
// with client certificates, TokenReview and SubjectAccessReview.
//
// It is a sub-package of podsync because it serves what the pod half runs:
// the pods (Options.Pods), their containers' log files in the layout podsync
// writes them (podsync.PodLogDir), and the usage of their containers
// measured by nodestatus/usage. DESIGN's dependency order puts the node API
// above podsync, nodestatus and runtime, and nothing below imports it.
//
// # Usage
//
//	coll, _ := usage.New(usage.Options{NodeName: node, Runtime: rt})
//	go coll.Run(ctx)
//	states := nodeapi.PodStates{Pods: podsFn, State: engine.State} // podsync.Engine
//	h, _ := nodeapi.New(nodeapi.Options{
//		Stats: coll, Pods: podsFn,
//		Runtime: rt, Container: states.Container, Sandbox: states.Sandbox,
//	})
//	srv, _ := nodeapi.NewServer(nodeapi.ServerOptions{
//		Handler: h,
//		Auth: nodeapi.AuthOptions{
//			NodeName:             node,
//			ClientCAFile:         "/etc/kubernetes/pki/ca.crt",
//			TokenReviews:         cs.AuthenticationV1().TokenReviews(),
//			SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(),
//		},
//		CertFile: certFile, KeyFile: keyFile, // or neither: self-signed
//	})
//	err := srv.ListenAndServe(ctx, ":10250")
//
// The Handler alone has no authentication or authorization: serve it
// through Server, or put Auth.Wrap in front of it.
//
// # Paths
//
//   - /stats/summary: the last usage sample as kubelet's Summary
//     (k8s.io/kubelet/pkg/apis/stats/v1alpha1) in JSON;
//     ?only_cpu_and_memory=true keeps names, start times, CPU and memory.
//     503 before the first sample.
//   - /metrics/resource: Prometheus text with kubelet's names and labels:
//     node_cpu_usage_seconds_total, node_memory_working_set_bytes,
//     container_cpu_usage_seconds_total, container_memory_working_set_bytes,
//     container_start_time_seconds (labels container, pod, namespace),
//     pod_cpu_usage_seconds_total, pod_memory_working_set_bytes (pod,
//     namespace), resource_scrape_error (1 without a complete sample).
//     CPU and memory samples carry the time they were read, which
//     metrics-server uses for its rates.
//   - /metrics: the agent's own metrics, Options.Metrics (404 without).
//
// With Options.Registerer every request is counted in
// kubelet_http_requests_total{method, path, server_type, long_running} as
// kubelet counts its node API's (path: healthz, pods, stats, metrics,
// metrics/resource, containerLogs, exec, attach, portForward, run, or
// other), so that a client can tell how often it was scraped.
//   - /healthz: "ok", or 500 with Options.Healthz's error.
//   - /pods: a v1 PodList of Options.Pods.
//   - /containerLogs/<namespace>/<pod>/<container>: the container's CRI log
//     file (<PodLogRoot>/<namespace>_<pod>_<uid>/<container>/<restart>.log,
//     lines "<RFC3339Nano time> <stream> <P|F> <message>", partial lines
//     joined) with kubectl's tailLines, sinceSeconds, sinceTime, timestamps,
//     limitBytes, previous (the run before the newest) and follow. A name
//     that is not a DNS subdomain ("..", a slash) is a 400 before any path
//     is built from it.
//
// # Streaming paths
//
//   - /exec/<namespace>/<pod>/[<uid>/]<container>: a command (one command
//     parameter per argument) with the streams input, output, error and
//     tty asked for with the value "1", as kubectl exec sends them
//     through the API server (ParseStreamOptions). GET or POST.
//   - /attach/<namespace>/<pod>/[<uid>/]<container>: the container's main
//     process, with the same stream parameters; the tty is the container
//     spec's when Options.Pods knows the pod.
//   - /portForward/<namespace>/<pod>[/<uid>]: the pod sandbox's network
//     namespace; SPDY clients name ports per stream, WebSocket clients in
//     port parameters (1-65535, else 400).
//   - /run/<namespace>/<pod>/[<uid>/]<container>: POST only; the command
//     in the cmd parameter, split at spaces as kubelet's, run to its end
//     through ExecSync with no timeout; its stdout then stderr are the
//     body; a non-zero exit is 500 "command '<cmd>' exited with <code>:
//     <stderr>".
//
// As kubelet does, the handler asks the runtime (Options.Runtime, CRI
// Exec, Attach or PortForward) for a URL on its streaming server and
// proxies the client's upgraded connection (SPDY or WebSocket) there,
// copying bytes both ways until either side closes (kubelet no longer
// redirects the client to the runtime, and neither does this). The
// client's Authorization header and WebSocket bearer-token protocol are
// not passed on. A request that is not an upgrade is 400 "Upgrade request
// required" before the runtime is asked (kubelet asks, then answers 500).
// When the request's context ends (Server shutting down), the session is
// closed.
//
// Pods are found as kubelet finds them: a pod not in Options.Pods (when
// set) is 404 "pod does not exist"; then the container or sandbox ID comes
// from Options.Container or Options.Sandbox, which an agent fills from
// podsync's last relist with PodStates (the newest running container of
// that name, the newest ready sandbox). Not found is 404 with kubelet's
// messages (`container not found ("<name>")`, `container <name> not found
// in pod <pod>_<namespace>`, `pod not found ("<pod>_<namespace>")`);
// kubelet answers these 500 (its error carries no status); a 404 says
// what happened. The runtime's errors are kubelet's: NotFound 404,
// ResourceExhausted 429, else 500, with the error as the body. No
// stream options: 400 "you must specify at least 1 of stdin, stdout,
// stderr"; with tty, stderr is dropped.
//
// The proxy is the package's own (dial, pass the request on, hand the
// runtime's 101 back, copy): apimachinery's UpgradeAwareHandler, which
// kubelet uses, links six more packages (golang.org/x/net/html among
// them) and added 0.30 MB to a program serving the Handler through Server,
// against 0.06 MB and no package for the streaming paths as written here.
// An exec round trip (true, stdout only) through the handler to containerd
// 1.6 took 47-54 ms, 1-4 ms more than opening containerd's URL directly
// (BENCHMARKS.md).
//
// # Serving: TLS, authentication, authorization
//
// Server serves over TLS 1.2 or later with the certificate and key in
// ServerOptions.CertFile and KeyFile, or, with neither, a certificate it
// signs itself at start for the host's name and addresses (kubelet's
// default). With ServerOptions.CertDir the pair is kept in
// kubelet.crt and kubelet.key there, as in kubelet's cert directory, and
// served again after a restart; without, it is made at each start and
// kept in memory. Server.Certificate returns it, for clients that pin it.
//
// As kubelet does, the server picks up new files without a restart: it
// serves the CertFile and KeyFile pair on disk and trusts the
// AuthOptions.ClientCAFile bundle on disk. Each TLS handshake (and each
// request, for the client CAs) stats the files and reads them again when
// one changed identity (a new file renamed over it), size or modification
// time, and in any case once ReloadResync (1m) after the last read, on the
// Clock; kubelet watches them with inotify and also re-reads them every
// minute. A pair that does not match (one file replaced, the other not
// yet) or a bundle without certificates is logged and the last good one
// kept. New client CAs are named in the handshake (so that a client picks
// a certificate they issued) and apply to connections already open, whose
// certificate is verified again. The self-signed certificate is not
// reloaded.
//
// RequestServingCertificate is kubelet's serverTLSBootstrap: it makes a
// key and a kubernetes.io/kubelet-serving CertificateSigningRequest as the
// node (CN system:node:<node>, O system:nodes, the node's names and
// addresses, usages digital signature and server auth), reads it back
// every PollInterval (1s) until it is issued, and returns the pair; a
// denied or failed request is an error wrapping ErrCSRDenied. Nothing
// approves kubelet-serving requests by default: an operator or an
// approver does. ServerOptions.Certificate serves such a pair once there
// is one; until then handshakes fail, as kubelet's do.
// RenewServingCertificate keeps it current as kubelet's certificate
// manager does: a new request at once without a certificate, else at a
// point drawn between 70% and 90% of its validity; a failed or denied
// request is made again after 1s, doubling to 5m.
//
// Auth does what kubelet's filter does, in kubelet's order:
//
//   - Authentication. A client certificate that verifies against the
//     client CAs (for client authentication, at the Clock's time) is the
//     user named by its CN, in the groups of its O; one without a CN
//     authenticates nobody. Else a bearer token (Authorization: Bearer, or
//     for a WebSocket the protocol base64url.bearer.authorization.k8s.io.
//     <token>) is sent in a TokenReview; the answer, either way, is cached
//     for AuthenticationCacheTTL (2m, kubelet's
//     authentication.webhook.cacheTTL), review errors are not. Kubelet
//     sets no audiences, so the API server checks the token against its
//     own (a token for another audience is not authenticated); with
//     AuthOptions.Audiences the review carries them and the token must be
//     for one. Authenticated users get group system:authenticated. With no
//     credentials at all the request is system:anonymous in
//     system:unauthenticated when Anonymous is on, else 401. Credentials
//     that fail are 401 "Unauthorized" even with Anonymous on, unless
//     another credential in the request succeeds.
//   - Authorization. Attributes maps the request as kubelet v1.37 does
//     (see its table): a verb from the method and nodes/<subresource>
//     named NodeName, with stats, metrics, log, checkpoint, statusz for
//     their paths, pods, healthz or configz tried before proxy for theirs,
//     and proxy for everything else, /containerLogs, /exec, /attach,
//     /portForward and /run included. Each is a SubjectAccessReview until
//     one allows; allowed answers are cached AuthorizedCacheTTL (5m),
//     denied ones UnauthorizedCacheTTL (30s), kubelet's
//     cacheAuthorizedTTL and cacheUnauthorizedTTL. None allowed: 403
//     "Forbidden (user=<user>, verb=<verb>, resource=nodes,
//     subresource(s)=[<subresources>])"; a review failing: 500.
//
// A WebSocket upgrade is a GET and needs only get, as in kubelet v1.37
// (its auth.go maps the method alone): get on nodes/proxy is not read-only
// once exec, attach or port-forward are served, since their WebSocket
// protocols arrive as GETs. AuthOptions.UpgradeRequiresCreate makes such
// an upgrade need create, as the API server does for pods/exec.
//
// The review clients are one-method interfaces with client-go's
// signatures, so clientset.AuthenticationV1().TokenReviews() and
// clientset.AuthorizationV1().SubjectAccessReviews() are them as they are;
// kubelet makes the reviews with the node's own identity, which the Node
// authorizer allows.
//
// Server and Auth live in this package, beside the Handler, rather than
// in a sub-package: the paths they authorize are this package's, they link
// nothing the Handler does not already (crypto/tls, k8s.io/api's
// authentication and authorization types), and an agent wires one import.
// They do not use k8s.io/apiserver's delegating authenticator and
// authorizer: a program linking client-go that blank-imports
// k8s.io/apiserver v0.37.2's request/x509 and plugin/pkg/authorizer/webhook
// grew from 33.0 MB to 65.6 MB and its idle RSS (after a GC) from 19 MiB
// to 35-41 MiB (go1.26, linux/amd64), past the agent's 30 MiB goal on its
// own. Server and Auth as written here add 0.48 MB to a program that
// serves the Handler (52.7 MB) and 1.4-2.0 MiB to its RSS after making a
// self-signed certificate.
//
// # Timing
//
// Stats paths read a published snapshot and never wait on I/O. A followed
// log is polled every Options.FollowInterval (1s) on Options.Clock: it
// continues in a new file when the log was rotated (renamed away, after
// reading what the old file gained), and ends when the request's context
// ends or the container's next run starts a newer log.
//
// Auth's caches are dated on AuthOptions.Clock and hold at most
// AuthOptions.CacheSize (4096) entries each (an arbitrary entry goes when
// one is full and nothing has expired); tokens are kept as their SHA-256.
// A review that fails with a transient error (connection reset, 500,
// timeout, 429) is retried after 500ms, then 1.5 times longer each time,
// 5 attempts in all (kubelet's webhook back-off, without its jitter), on
// the clock; ReviewTimeout (10s) bounds a review with its retries.
// Server verifies a client certificate once per connection (again once
// the chain expires), since verifying costs about 120 µs; Auth.Wrap
// without Server verifies it per request. When Run's context ends,
// requests in flight have their contexts cancelled and ShutdownGrace (5s)
// to finish.
//
// # Limits
//
// Auth: no front-proxy (request header) authentication; a serving
// certificate's request is polled, not watched; no metrics
// of reviews or decisions. Handler: no /stats/ container queries,
// /metrics/cadvisor or /metrics/probes. Streaming: WebSocket clients are
// proxied to the runtime as they come, which serves the channel.k8s.io
// protocols up to v4 (containerd 1.6); kubelet v1.37 also translates
// kubectl's v5.channel.k8s.io WebSockets and port-forward tunnels to SPDY
// (ExtendWebSocketsToKubelet), which this handler does not, so such a
// client falls back to SPDY or fails. Through the API server kubectl's
// WebSockets work: a node that does not declare ExtendWebSocketsToKubelet
// in status.declaredFeatures (an agent built on this package must not)
// gets SPDY from the API server, which translates; no streaming idle timeout or byte
// rate limit; no metrics of sessions; no ephemeral-container creation. Logs: rotated files of the current run are not read
// back (as kubelet, only the live file), and a followed log of a container
// that exited without restarting is followed until the client leaves.
package nodeapi
