//go:build !linux

package probe

import "net"

func probeDialer() *net.Dialer { return &net.Dialer{} }
