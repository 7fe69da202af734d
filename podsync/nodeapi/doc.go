// Package nodeapi serves the read-only half of kubelet's node API as an
// http.Handler: /healthz, /pods, /stats/summary, /metrics/resource and
// /containerLogs/<namespace>/<pod>/<container>.
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
//	h, _ := nodeapi.New(nodeapi.Options{Stats: coll, Pods: podsFn})
//	// h has no authentication or authorization: wrap it before serving
//	// it on a network port, as kubelet does (client certificates,
//	// TokenReview, SubjectAccessReview).
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
// # Timing
//
// Stats paths read a published snapshot and never wait on I/O. A followed
// log is polled every Options.FollowInterval (1s) on Options.Clock: it
// continues in a new file when the log was rotated (renamed away, after
// reading what the old file gained), and ends when the request's context
// ends or the container's next run starts a newer log.
//
// # Limits
//
// No authentication or authorization (see above). No exec, attach,
// port-forward, /stats/ container queries, /metrics/cadvisor or
// /metrics/probes. Logs: rotated files of the current run are not read
// back (as kubelet, only the live file), and a followed log of a container
// that exited without restarting is followed until the client leaves.
package nodeapi
