package probe

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TCPSocket is Success when a TCP connection to action's host (default
// target.PodIP) and port opens within timeout, and Failure otherwise. The
// connection is closed at once.
func (h *Handlers) TCPSocket(ctx context.Context, action *corev1.TCPSocketAction, target Target, timeout time.Duration) Outcome {
	port, err := resolvePort(action.Port, target.Container)
	if err != nil {
		return Outcome{Result: Unknown, Message: truncate(err.Error()), Err: err}
	}
	host := action.Host
	if host == "" {
		host = target.PodIP
	}
	d := probeDialer()
	d.Timeout = timeout
	conn, err := d.DialContext(ctx, "tcp", hostPort(host, port))
	if err != nil {
		return Outcome{Result: Failure, Message: truncate(err.Error())}
	}
	_ = conn.Close()
	return Outcome{Result: Success}
}
