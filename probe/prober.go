package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/runtime"
)

// HandlerOptions configures the default Prober built by NewHandlers.
type HandlerOptions struct {
	// Execer runs exec probes through the runtime's ExecSync. Default nil:
	// exec probes report ErrNoExecer.
	Execer runtime.Execer
	// Version is the "<major>.<minor>" sent as "User-Agent: <Product>/<Version>"
	// by HTTP and gRPC probes. Default "1.37".
	Version string
	// Product names the client in the User-Agent. Default "kube-probe";
	// the kubelet's lifecycle hooks send "kube-lifecycle".
	Product string
	// TLSConfig is used by HTTPS probes (and gRPC probes in TLS mode).
	// Default: certificates are not verified, as kubelet does.
	TLSConfig *tls.Config
	// GRPCTLS honours `grpc.mode: TLS` on gRPC probes (kubelet's alpha
	// GRPCContainerProbeTLS gate). Default false: gRPC probes are plaintext.
	GRPCTLS bool
	// ExecGrace is how long past the probe's timeout an exec probe waits for
	// the runtime to answer. As in kubelet, the runtime enforces the probe's
	// timeout (ExecSync's timeout) and the call may take up to the runtime
	// request timeout more (remote.Client bounds it so); ExecGrace is the
	// bound for an Execer that never answers, after which the probe gives up
	// and reports a timeout. Default DefaultExecGrace (2m, remote.DefaultRequestTimeout),
	// as kubelet's gRPC deadline; between 10ms and 1h.
	ExecGrace time.Duration
}

// DefaultExecGrace is the default of HandlerOptions.ExecGrace: kubelet's
// runtime request timeout, as runtime/remote's DefaultRequestTimeout.
const DefaultExecGrace = 2 * time.Minute

// DefaultVersion is the kube-probe version sent when HandlerOptions.Version is empty.
const DefaultVersion = "1.37"

var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// Handlers is the default Prober: kubelet's exec, HTTP GET, TCP and gRPC
// handlers, chosen by which handler field of the probe is set.
type Handlers struct {
	execer    runtime.Execer
	userAgent string
	tlsConfig *tls.Config
	grpcTLS   bool
	execGrace time.Duration
	transport *http.Transport
}

var _ Prober = (*Handlers)(nil)

// NewHandlers returns the default Prober: kubelet's handlers.
func NewHandlers(o HandlerOptions) (*Handlers, error) {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Product == "" {
		o.Product = "kube-probe"
	}
	if strings.ContainsAny(o.Product, " /\t\r\n") {
		return nil, fmt.Errorf("probe: HandlerOptions.Product %q must be one token without '/' or spaces", o.Product)
	}
	if !versionRE.MatchString(o.Version) {
		return nil, fmt.Errorf("probe: HandlerOptions.Version %q is not <major>.<minor>", o.Version)
	}
	if o.TLSConfig == nil {
		o.TLSConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // kubelet does not verify probe targets
	}
	if o.ExecGrace == 0 {
		o.ExecGrace = DefaultExecGrace
	}
	if err := optcheck.Range("probe: HandlerOptions.ExecGrace", o.ExecGrace, 10*time.Millisecond, time.Hour); err != nil {
		return nil, err
	}
	h := &Handlers{
		execer:    o.Execer,
		userAgent: o.Product + "/" + o.Version,
		tlsConfig: o.TLSConfig,
		grpcTLS:   o.GRPCTLS,
		execGrace: o.ExecGrace,
	}
	h.transport = &http.Transport{
		TLSClientConfig:     o.TLSConfig,
		DisableKeepAlives:   true,
		Proxy:               nil,
		DisableCompression:  true,
		DialContext:         probeDialer().DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: -1,
		// Bounded memory on untrusted targets: see MaxResponseHeaderBytes.
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	return h, nil
}

// Probe runs spec against target with the handler that spec names. It
// returns within the probe's timeoutSeconds (default 1s) plus a small grace
// for exec probes, or when ctx ends. A panic in a handler is recovered and
// reported as an Outcome with Err matching ErrPanic.
func (h *Handlers) Probe(ctx context.Context, spec *corev1.Probe, target Target) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = panicOutcome(r)
		}
	}()
	if spec == nil {
		return Outcome{Result: Unknown, Err: ErrNoHandler}
	}
	timeout := time.Duration(spec.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	switch {
	case spec.Exec != nil:
		return h.Exec(ctx, spec.Exec, target, timeout)
	case spec.HTTPGet != nil:
		return h.HTTPGet(ctx, spec.HTTPGet, target, timeout)
	case spec.TCPSocket != nil:
		return h.TCPSocket(ctx, spec.TCPSocket, target, timeout)
	case spec.GRPC != nil:
		return h.GRPC(ctx, spec.GRPC, target, timeout)
	default:
		return Outcome{Result: Unknown, Err: ErrNoHandler}
	}
}

func panicOutcome(r any) Outcome {
	err := fmt.Errorf("%w: %v", ErrPanic, r)
	return Outcome{Result: Unknown, Message: truncate(err.Error()), Err: err}
}

// resolvePort turns a probe's port (a number or the name of one of the
// container's ports) into a port number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	var port int
	switch p.Type {
	case intstr.Int:
		port = int(p.IntVal)
	case intstr.String:
		found := false
		if c != nil {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					port, found = int(cp.ContainerPort), true
					break
				}
			}
		}
		if !found {
			return 0, fmt.Errorf("%w: port %q not found in the container's ports", ErrInvalidPort, p.StrVal)
		}
	default:
		return 0, fmt.Errorf("%w: %v", ErrInvalidPort, p)
	}
	if port <= 0 || port > 65535 {
		return 0, fmt.Errorf("%w: %d", ErrInvalidPort, port)
	}
	return port, nil
}

func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
