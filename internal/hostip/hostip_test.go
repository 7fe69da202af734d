package hostip

import "testing"

func TestDefaultRoute(t *testing.T) {
	ip := DefaultRoute()
	if ip == nil {
		t.Skip("no default route on this host")
	}
	if ip.IsUnspecified() || ip.IsLoopback() || ip.To4() == nil {
		t.Errorf("DefaultRoute() = %v; want an IPv4 address of an interface", ip)
	}
}
