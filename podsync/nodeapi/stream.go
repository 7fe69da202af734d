package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime"
)

// StreamRuntime is what the streaming paths ask of the container runtime:
// Exec, Attach and PortForward for /exec, /attach and /portForward, and
// ExecSync for /run. Every runtime.Runtime (runtime/remote's Client, the
// fake) is one.
type StreamRuntime interface {
	runtime.Streamer
	runtime.Execer
}

var _ StreamRuntime = runtime.Runtime(nil)

// StreamOptions are the query parameters of /exec and /attach, as kubectl
// (through the API server) sends them: command (repeated, exec only),
// input, output, error and tty, each stream on when its value is "1".
type StreamOptions struct {
	// Command is the command /exec runs, one argument per command
	// parameter.
	Command []string
	// Stdin, Stdout, Stderr and TTY are input, output, error and tty.
	Stdin, Stdout, Stderr, TTY bool
}

// ParseStreamOptions reads StreamOptions from a query as kubelet does: a
// stream is requested by the value "1" (anything else is off); with tty,
// stderr is dropped (a terminal has one output); none of input, output
// and error is an error (a 400).
func ParseStreamOptions(q url.Values) (StreamOptions, error) {
	o := StreamOptions{
		Command: q["command"],
		Stdin:   q.Get("input") == "1",
		Stdout:  q.Get("output") == "1",
		Stderr:  q.Get("error") == "1",
		TTY:     q.Get("tty") == "1",
	}
	if o.TTY {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// podRef is a pod named in a streaming path, with the container if the
// path names one.
type podRef struct {
	ns, name, uid, container string
}

// parseStreamPath splits /<kind>/<namespace>/<pod>[/<uid>]/<container>
// (withContainer) or /<kind>/<namespace>/<pod>[/<uid>].
func parseStreamPath(p, prefix string, withContainer bool) (podRef, bool) {
	parts := strings.Split(strings.TrimPrefix(p, prefix), "/")
	var r podRef
	n := len(parts)
	if withContainer {
		switch n {
		case 3:
			r = podRef{ns: parts[0], name: parts[1], container: parts[2]}
		case 4:
			r = podRef{ns: parts[0], name: parts[1], uid: parts[2], container: parts[3]}
		default:
			return r, false
		}
		if !validName(r.container) {
			return r, false
		}
	} else {
		switch n {
		case 2:
			r = podRef{ns: parts[0], name: parts[1]}
		case 3:
			r = podRef{ns: parts[0], name: parts[1], uid: parts[2]}
		default:
			return r, false
		}
	}
	hasUID := n == 4 || (!withContainer && n == 3)
	if !validName(r.ns) || !validName(r.name) || (hasUID && !validUID(r.uid)) {
		return r, false
	}
	return r, true
}

// validUID accepts what a pod UID looks like (a UUID, or a static pod's
// hash): letters, digits and dashes.
func validUID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// streamMethod answers 405 to anything but GET and POST (and for /run,
// anything but POST).
func streamMethod(w http.ResponseWriter, r *http.Request, postOnly bool) bool {
	if r.Method == http.MethodPost || (!postOnly && r.Method == http.MethodGet) {
		return true
	}
	if postOnly {
		w.Header().Set("Allow", "POST")
	} else {
		w.Header().Set("Allow", "GET, POST")
	}
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// desiredPod finds the pod in Options.Pods, as kubelet asks its pod
// manager first. ok is true, with a nil pod, when Options.Pods is nil.
func (h *Handler) desiredPod(ctx context.Context, ns, name string) (*corev1.Pod, bool) {
	if h.opts.Pods == nil {
		return nil, true
	}
	for _, p := range h.opts.Pods(ctx) {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// streamTarget checks what every streaming path checks: the method, the
// runtime, the path and that the request is an upgrade. It answers the
// request itself and returns false when one fails.
func (h *Handler) streamTarget(w http.ResponseWriter, r *http.Request, prefix string, withContainer, postOnly bool) (podRef, bool) {
	if !streamMethod(w, r, postOnly) {
		return podRef{}, false
	}
	if h.opts.Runtime == nil {
		http.Error(w, "no container runtime to stream from", http.StatusServiceUnavailable)
		return podRef{}, false
	}
	ref, ok := parseStreamPath(r.URL.Path, prefix, withContainer)
	if !ok {
		want := prefix + "<namespace>/<pod>/[<uid>/]<container>"
		if !withContainer {
			want = prefix + "<namespace>/<pod>[/<uid>]"
		}
		http.Error(w, "want "+want+" with valid names", http.StatusBadRequest)
		return ref, false
	}
	// Only an upgrade can be proxied: refuse anything else before the
	// runtime prepares a session for it.
	if !postOnly && !headerHasToken(r.Header, "Connection", "upgrade") {
		http.Error(w, "Upgrade request required", http.StatusBadRequest)
		return ref, false
	}
	return ref, true
}

// pod finds the pod of ref in Options.Pods, answering 404 "pod does not
// exist" when it is not there. The pod is nil when Options.Pods is.
func (h *Handler) pod(w http.ResponseWriter, r *http.Request, ref podRef) (*corev1.Pod, bool) {
	pod, ok := h.desiredPod(r.Context(), ref.ns, ref.name)
	if !ok {
		http.Error(w, "pod does not exist", http.StatusNotFound)
	}
	return pod, ok
}

// container resolves the container of ref through Options.Container.
func (h *Handler) container(ctx context.Context, ref podRef) (string, bool) {
	if h.opts.Container == nil {
		return "", false
	}
	id, ok := h.opts.Container(ctx, ref.ns, ref.name, ref.uid, ref.container)
	return id, ok && id != ""
}

// podFullName is kubelet's <name>_<namespace>, which its messages use.
func podFullName(ref podRef) string { return ref.name + "_" + ref.ns }

func (h *Handler) exec(w http.ResponseWriter, r *http.Request) {
	ref, ok := h.streamTarget(w, r, "/exec/", true, false)
	if !ok {
		return
	}
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(opts.Command) == 0 {
		http.Error(w, "no command: give one or more command parameters", http.StatusBadRequest)
		return
	}
	if _, ok := h.pod(w, r, ref); !ok {
		return
	}
	id, ok := h.container(r.Context(), ref)
	if !ok {
		http.Error(w, fmt.Sprintf("container not found (%q)", ref.container), http.StatusNotFound)
		return
	}
	u, err := h.opts.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: opts.Command,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY,
	})
	h.proxyStream(w, r, u, err)
}

func (h *Handler) attach(w http.ResponseWriter, r *http.Request) {
	ref, ok := h.streamTarget(w, r, "/attach/", true, false)
	if !ok {
		return
	}
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, ok := h.pod(w, r, ref)
	if !ok {
		return
	}
	id, ok := h.container(r.Context(), ref)
	if !ok {
		http.Error(w, fmt.Sprintf("container %s not found in pod %s", ref.container, podFullName(ref)), http.StatusNotFound)
		return
	}
	// Whether the process has a terminal was fixed when it started: the
	// pod's spec says, where the handler knows the pod.
	if pod != nil {
		if ref.uid != "" && string(pod.UID) != ref.uid {
			http.Error(w, fmt.Sprintf("pod %s not found", podFullName(ref)), http.StatusNotFound)
			return
		}
		spec := podsync.ContainerSpec(pod, ref.container)
		if spec == nil {
			http.Error(w, fmt.Sprintf("container %s not found in pod %s", ref.container, podFullName(ref)), http.StatusNotFound)
			return
		}
		opts.TTY = spec.TTY
		if opts.TTY {
			opts.Stderr = false
		}
	}
	u, err := h.opts.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{
		ContainerId: id, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY,
	})
	h.proxyStream(w, r, u, err)
}

func (h *Handler) portForward(w http.ResponseWriter, r *http.Request) {
	ref, ok := h.streamTarget(w, r, "/portForward/", false, false)
	if !ok {
		return
	}
	ports, err := parsePorts(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, ok := h.pod(w, r, ref)
	if !ok {
		return
	}
	if pod != nil && ref.uid != "" && string(pod.UID) != ref.uid {
		http.Error(w, "pod not found", http.StatusNotFound)
		return
	}
	var id string
	if h.opts.Sandbox != nil {
		id, ok = h.opts.Sandbox(r.Context(), ref.ns, ref.name, ref.uid)
	}
	if !ok || id == "" {
		http.Error(w, fmt.Sprintf("pod not found (%q)", podFullName(ref)), http.StatusNotFound)
		return
	}
	u, err := h.opts.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: id, Port: ports})
	h.proxyStream(w, r, u, err)
}

// parsePorts reads the port parameters a WebSocket port-forward names its
// ports with, as kubelet does (SPDY names them per stream, and kubelet
// reads none then): each must be a port number from 1 to 65535.
func parsePorts(r *http.Request) ([]int32, error) {
	if !isWebSocket(r) {
		return nil, nil
	}
	var ports []int32
	for _, v := range r.URL.Query()["port"] {
		for _, s := range strings.Split(v, ",") {
			p, err := strconv.ParseUint(s, 10, 16)
			if err != nil || p == 0 {
				return nil, fmt.Errorf("unable to parse %q as a port: want 1-65535", s)
			}
			ports = append(ports, int32(p))
		}
	}
	if len(ports) == 0 {
		return nil, errors.New("query parameter \"port\" is required")
	}
	return ports, nil
}

// isWebSocket reports whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), token) {
				return true
			}
		}
	}
	return false
}

// run serves /run: the command in cmd (split at spaces, as kubelet's
// legacy parameter), run to its end through ExecSync, stdout then stderr
// in the body; a non-zero exit is a 500 naming the code and stderr.
func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	ref, ok := h.streamTarget(w, r, "/run/", true, true)
	if !ok {
		return
	}
	if _, ok := h.pod(w, r, ref); !ok {
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	id, ok := h.container(r.Context(), ref)
	if !ok {
		http.Error(w, fmt.Sprintf("container not found (%q)", ref.container), http.StatusNotFound)
		return
	}
	res, err := h.opts.Runtime.ExecSync(r.Context(), id, cmd, 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if res.ExitCode != 0 {
		http.Error(w, fmt.Sprintf("command '%s' exited with %d: %s", strings.Join(cmd, " "), res.ExitCode, res.Stderr), http.StatusInternalServerError)
		return
	}
	out := append(res.Stdout, res.Stderr...)
	if len(out) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// proxyStream answers a runtime's error as kubelet does (NotFound 404,
// ResourceExhausted 429, else 500, with the error as the body) or proxies
// the client's upgraded connection to the runtime's streaming URL.
func (h *Handler) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string, err error) {
	if err != nil {
		code := http.StatusInternalServerError
		switch status.Code(err) {
		case codes.NotFound:
			code = http.StatusNotFound
		case codes.ResourceExhausted:
			code = http.StatusTooManyRequests
		}
		http.Error(w, err.Error(), code)
		return
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		http.Error(w, fmt.Sprintf("runtime returned an unusable streaming URL %q", rawURL), http.StatusInternalServerError)
		return
	}
	proxyUpgrade(w, withoutCredentials(r), u)
}

// withoutCredentials returns r without the client's credentials (its
// Authorization header and a WebSocket bearer-token protocol), which the
// runtime's streaming server has no use for.
func withoutCredentials(r *http.Request) *http.Request {
	auth := r.Header.Get("Authorization") != "" || r.Header.Get("Proxy-Authorization") != ""
	protos := r.Header.Values("Sec-WebSocket-Protocol")
	bearer := false
	for _, v := range protos {
		if strings.Contains(v, wsTokenPrefix) {
			bearer = true
		}
	}
	if !auth && !bearer {
		return r
	}
	r2 := r.Clone(r.Context())
	r2.Header.Del("Authorization")
	r2.Header.Del("Proxy-Authorization")
	if bearer {
		r2.Header.Del("Sec-WebSocket-Protocol")
		var keep []string
		for _, v := range protos {
			for p := range strings.SplitSeq(v, ",") {
				if p = strings.TrimSpace(p); p != "" && !strings.HasPrefix(p, wsTokenPrefix) {
					keep = append(keep, p)
				}
			}
		}
		if len(keep) > 0 {
			r2.Header.Set("Sec-WebSocket-Protocol", strings.Join(keep, ", "))
		}
	}
	return r2
}

// PodStates finds the containers and sandboxes of the pods an agent runs
// in what podsync last observed of them: its methods are
// Options.Container and Options.Sandbox. An agent sets Pods to its desired
// pods (what it passes as Options.Pods) and State to podsync.Engine.State.
type PodStates struct {
	// Pods are the pods the agent runs, to find a pod's UID by its name.
	Pods func(ctx context.Context) []*corev1.Pod
	// State returns what the last relist saw of the pod with a UID, or nil.
	State func(uid types.UID) *podsync.PodState
}

// state finds the observed pod: by UID when one is given (the namespace
// and name must match), else through Pods by namespace and name.
func (p PodStates) state(ctx context.Context, ns, name, uid string) *podsync.PodState {
	if p.State == nil {
		return nil
	}
	if uid == "" {
		if p.Pods == nil {
			return nil
		}
		for _, pod := range p.Pods(ctx) {
			if pod.Namespace == ns && pod.Name == name {
				uid = string(pod.UID)
				break
			}
		}
		if uid == "" {
			return nil
		}
	}
	st := p.State(types.UID(uid))
	if st == nil || st.Namespace != ns || st.Name != name {
		return nil
	}
	return st
}

// Container returns the ID of the newest running container named
// container in the pod, as kubelet finds one among the running pods.
func (p PodStates) Container(ctx context.Context, ns, name, uid, container string) (string, bool) {
	st := p.state(ctx, ns, name, uid)
	if st == nil {
		return "", false
	}
	for _, c := range st.Containers {
		if c.Name == container && c.Running() {
			return c.ID, true
		}
	}
	return "", false
}

// Sandbox returns the ID of the pod's newest ready sandbox.
func (p PodStates) Sandbox(ctx context.Context, ns, name, uid string) (string, bool) {
	st := p.state(ctx, ns, name, uid)
	if st == nil {
		return "", false
	}
	for _, s := range st.Sandboxes {
		if s.Ready() {
			return s.ID, true
		}
	}
	return "", false
}
