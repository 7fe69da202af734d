package nodeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/promutil"
	"github.com/nodekit/nodekit/nodestatus/usage"
)

// Stats is where the handler reads usage samples from; a *usage.Collector
// is one.
type Stats interface {
	// Latest returns the last sample, or nil before the first. It must not
	// wait on I/O.
	Latest() *usage.Snapshot
}

// Defaults and bounds of Options.
const (
	// DefaultPodLogRoot holds the pods' log directories, as kubelet's.
	DefaultPodLogRoot = "/var/log/pods"
	// DefaultFollowInterval is how often a followed log is polled for more.
	DefaultFollowInterval = time.Second
	// MinFollowInterval and MaxFollowInterval bound Options.FollowInterval.
	MinFollowInterval = 10 * time.Millisecond
	MaxFollowInterval = time.Minute
)

// Options configure a Handler. The zero value of each field means its
// default.
type Options struct {
	// Stats serves /stats/summary and /metrics/resource. Nil: those paths
	// answer 503 Service Unavailable.
	Stats Stats
	// Pods returns the pods the agent runs, for /pods and to find a pod's
	// UID (its log directory) for /containerLogs. The streaming paths
	// answer 404 "pod does not exist" for a pod not among them, as kubelet
	// asks its pod manager first, and /attach takes the container's tty
	// from its spec. It must not wait on the network. Nil: no pods for
	// /pods, and the streaming paths find pods through Container and
	// Sandbox alone.
	Pods func(ctx context.Context) []*corev1.Pod
	// Metrics serves /metrics, the agent's own metrics (kubelet serves its
	// registry there; authorized as nodes/metrics). Nil: 404.
	Metrics http.Handler
	// Registerer receives kubelet_http_requests_total{method, path,
	// server_type, long_running}, the requests the handler served, as
	// kubelet counts its node API's (path: the first element, or
	// metrics/<name>, of the known paths; other: the rest). Default none.
	Registerer prometheus.Registerer
	// Healthz reports the agent's health for /healthz: nil is healthy.
	// Nil: always healthy.
	Healthz func(ctx context.Context) error
	// PodLogRoot holds the pods' log directories
	// (<namespace>_<name>_<uid>/<container>/<restart>.log).
	// Default DefaultPodLogRoot ("/var/log/pods").
	PodLogRoot string
	// Clock paces followed logs. Default clock.RealClock{}.
	Clock clock.WithTicker
	// Runtime serves /exec, /attach and /portForward (it hands out a URL
	// on its streaming server, to which the handler proxies the client's
	// upgraded connection) and /run (ExecSync). A *remote.Client (runtime/remote) is one.
	// Nil: those paths answer 503 Service Unavailable.
	Runtime StreamRuntime
	// Container finds the runtime's ID of a running container of a pod,
	// for /exec, /attach and /run: uid is "" unless the path names it
	// (then the pod must have that UID). It must not wait on the network.
	// PodStates.Container finds it in podsync's last relist (an agent sets
	// PodStates{Pods: podsFn, State: engine.State}). Nil: no container is
	// found (404).
	Container func(ctx context.Context, namespace, pod, uid, container string) (containerID string, ok bool)
	// Sandbox finds the runtime's ID of a pod's ready sandbox, for
	// /portForward, as Container does; PodStates.Sandbox is one. Nil: no
	// sandbox is found (404).
	Sandbox func(ctx context.Context, namespace, pod, uid string) (sandboxID string, ok bool)
	// FollowInterval is how often a followed log is checked for more lines
	// and for rotation. Default DefaultFollowInterval (1s); between
	// MinFollowInterval and MaxFollowInterval.
	FollowInterval time.Duration
	// Logs, when set, serves /containerLogs instead of the files under
	// PodLogRoot: a simulated node's lines (podsync/podsynctest's
	// Backend.Logs). The handler applies the request's tailLines,
	// sinceSeconds, sinceTime, timestamps and limitBytes to the lines it
	// returns; follow ends with the last of them, and previous asks Logs
	// for the container's run before its last. An error is a 404 with its
	// message. Default nil: the log files.
	Logs func(ctx context.Context, namespace, pod, container string, previous bool) ([]LogLine, error)
	// DisableProfiling turns /debug/pprof/ off (404), as the kubelet's
	// enableProfilingHandler: false does. Default false: served, as the
	// kubelet's default, behind the same authorization as /exec
	// (nodes/proxy).
	DisableProfiling bool
}

// LogLine is one line of a container's log as Options.Logs returns it.
type LogLine struct {
	// Time is when the line was logged.
	Time time.Time
	// Message is the line without its newline.
	Message string
}

func (o Options) withDefaults() (Options, error) {
	if o.PodLogRoot == "" {
		o.PodLogRoot = DefaultPodLogRoot
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.FollowInterval == 0 {
		o.FollowInterval = DefaultFollowInterval
	}
	if err := optcheck.Range("Options.FollowInterval", o.FollowInterval, MinFollowInterval, MaxFollowInterval); err != nil {
		return o, err
	}
	return o, nil
}

// Handler serves kubelet's node API paths: /healthz, /pods,
// /stats/summary, /metrics/resource, /metrics, /containerLogs/, the streaming
// /exec/, /attach/, /portForward/ and /run/, and /debug/pprof/. It does no authentication or
// authorization: wrap it.
type Handler struct {
	opts     Options
	requests *prometheus.CounterVec // nil: not counted
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler.
func New(opts Options) (*Handler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("nodeapi: %w", err)
	}
	h := &Handler{opts: opts}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "kubelet", Name: "http_requests_total",
		Help: "HTTP requests the node API received, by method, path, server type and whether long-running.",
	}, []string{"method", "path", "server_type", "long_running"})
	if h.requests, err = promutil.Register(opts.Registerer, requests); err != nil {
		return nil, fmt.Errorf("nodeapi: Options.Registerer: %w", err)
	}
	return h, nil
}

// The paths and methods kubelet_http_requests_total names; others count
// as "other", as kubelet buckets them.
var (
	requestPaths = map[string]bool{"healthz": true, "pods": true, "stats": true, "metrics": true, "metrics/resource": true,
		"containerLogs": true, "exec": true, "attach": true, "portForward": true, "run": true}
	requestMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
		http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true, http.MethodConnect: true, http.MethodTrace: true}
	// kubelet's long-running paths, spelled as it spells them: its
	// portForward requests count as not long-running.
	longRunningPaths = map[string]bool{"exec": true, "attach": true, "portforward": true, "debug": true}
)

// requestLabels are a request's kubelet_http_requests_total labels.
func requestLabels(method, path string) []string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 3)
	root := parts[0]
	if root == "metrics" && len(parts) > 1 {
		root += "/" + parts[1]
	}
	if !requestPaths[root] {
		root = "other"
	}
	if !requestMethods[method] {
		method = "other"
	}
	// The handler is served behind authentication: kubelet's readwrite
	// server.
	return []string{method, root, "readwrite", strconv.FormatBool(longRunningPaths[root])}
}

// ServeHTTP routes a request to one of the node API paths.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	h.requests.WithLabelValues(requestLabels(r.Method, p)...).Inc()
	switch {
	case p == "/healthz":
		h.healthz(w, r)
	case p == "/pods" || p == "/pods/":
		h.pods(w, r)
	case p == "/stats/summary" || p == "/stats/summary/":
		h.summary(w, r)
	case p == "/metrics/resource":
		h.metricsResource(w, r)
	case p == "/metrics" && h.opts.Metrics != nil:
		if readOnly(w, r) {
			h.opts.Metrics.ServeHTTP(w, r)
		}
	case strings.HasPrefix(p, "/containerLogs/"):
		h.containerLogs(w, r)
	case strings.HasPrefix(p, "/exec/"):
		h.exec(w, r)
	case strings.HasPrefix(p, "/attach/"):
		h.attach(w, r)
	case strings.HasPrefix(p, "/portForward/"):
		h.portForward(w, r)
	case strings.HasPrefix(p, "/run/"):
		h.run(w, r)
	case strings.HasPrefix(p, "/debug/pprof/") && !h.opts.DisableProfiling:
		h.profile(w, r)
	default:
		http.NotFound(w, r)
	}
}

// readOnly answers 405 to anything but GET and HEAD.
func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	if h.opts.Healthz != nil {
		if err := h.opts.Healthz(r.Context()); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

func (h *Handler) listPods(ctx context.Context) []*corev1.Pod {
	if h.opts.Pods == nil {
		return nil
	}
	return h.opts.Pods(ctx)
}

func (h *Handler) pods(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	list := corev1.PodList{TypeMeta: metav1TypeMeta("PodList"), Items: []corev1.Pod{}}
	for _, p := range h.listPods(r.Context()) {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// errNoSample is served while the collector has not sampled yet.
var errNoSample = errors.New("no usage sample yet")
