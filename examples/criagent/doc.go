// Package criagent is a complete node agent on a container runtime composed
// from nodekit's library in a page (see example_test.go): registration,
// status and lease, pods from a manifest directory and the API server run
// through CRI with probes, pod data, eviction, image GC and log rotation,
// and the kubelet's node API on port 10250 for kubectl logs, exec and top.
// examples/agent is the same composition behind the kubelet's flags.
package criagent
