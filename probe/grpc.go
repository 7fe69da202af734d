package probe

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
)

// GRPC calls grpc.health.v1.Health/Check on target.PodIP and action's port
// with action's service name (empty when unset). SERVING is Success; any
// other status, an error or no answer within timeout is Failure.
func (h *Handlers) GRPC(ctx context.Context, action *corev1.GRPCAction, target Target, timeout time.Duration) Outcome {
	if action.Port <= 0 || action.Port > 65535 {
		err := fmt.Errorf("%w: %d", ErrInvalidPort, action.Port)
		return Outcome{Result: Unknown, Message: err.Error(), Err: err}
	}
	service := ""
	if action.Service != nil {
		service = *action.Service
	}
	creds := insecure.NewCredentials()
	if h.grpcTLS && action.Mode != nil && *action.Mode == corev1.GRPCProbeModeTLS {
		creds = credentials.NewTLS(h.tlsConfig.Clone())
	}
	addr := hostPort(target.PodIP, int(action.Port))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent(h.userAgent),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return probeDialer().DialContext(ctx, "tcp", a)
		}),
	)
	if err != nil {
		return Outcome{Result: Failure, Message: truncate(fmt.Sprintf("error: failed to connect service at %q: %v", addr, err))}
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unimplemented:
			return Outcome{Result: Failure, Message: truncate("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message())}
		case codes.DeadlineExceeded:
			return Outcome{Result: Failure, Message: truncate(fmt.Sprintf("timeout: health rpc to %q did not complete within %v: %s", addr, timeout, st.Message()))}
		default:
			return Outcome{Result: Failure, Message: truncate(fmt.Sprintf("error: health rpc probe failed: %v", err))}
		}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Outcome{Result: Failure, Message: fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String())}
	}
	return Outcome{Result: Success, Message: "service healthy"}
}
