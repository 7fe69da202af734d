// Package hostip finds the host's default-route address, the node address
// the kubelet picks when none is given.
package hostip

import (
	"net"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// DefaultRoute returns the IPv4 address of the default-route interface, nil
// when there is none.
func DefaultRoute() net.IP {
	ip, err := utilnet.ResolveBindAddress(net.IPv4zero)
	if err != nil || ip == nil || ip.IsUnspecified() {
		return nil
	}
	return ip
}
