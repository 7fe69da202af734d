package probe

import (
	"net"
	"syscall"
)

// probeDialer returns a dialer whose sockets linger for 1s on close, so that
// frequent probes do not pile up sockets in TIME-WAIT (kubelet does the same).
func probeDialer() *net.Dialer {
	return &net.Dialer{
		Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) {
				// Best effort, as kubelet: a socket without it still works.
				_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
			})
		},
	}
}
