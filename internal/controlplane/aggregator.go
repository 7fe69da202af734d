package controlplane

import (
	"os"
	"path/filepath"
)

// Names of the aggregation layer's front proxy, as kubeadm names them.
const (
	// frontProxyClient is the common name of the certificate kube-apiserver
	// presents to an aggregated API server (--proxy-client-cert-file); the
	// aggregated server accepts the X-Remote-* headers only from it
	// (--requestheader-allowed-names).
	frontProxyClient = "front-proxy-client"
)

// aggregatorFlags makes a front-proxy CA of its own (the request-header
// client CA, which must not be the client CA: a client certificate of the
// cluster CA could otherwise assert any user in X-Remote-User) and the proxy
// client certificate it signs, writes them into the control plane's
// directory and adds kube-apiserver's flags for the aggregation layer to
// flags. Aggregated API servers are reached at their Service's endpoints
// (--enable-aggregator-routing), so no kube-proxy (no cluster IP routing)
// is needed.
func (cp *ControlPlane) aggregatorFlags(flags map[string]string) error {
	ca, err := newAuthority("nodekit-front-proxy-ca")
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.client(frontProxyClient, nil)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"front-proxy-ca.crt":     ca.certPEM,
		"front-proxy-client.crt": certPEM,
		"front-proxy-client.key": keyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cp.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	flags["requestheader-client-ca-file"] = filepath.Join(cp.dir, "front-proxy-ca.crt")
	flags["requestheader-allowed-names"] = frontProxyClient
	flags["requestheader-username-headers"] = "X-Remote-User"
	flags["requestheader-group-headers"] = "X-Remote-Group"
	flags["requestheader-extra-headers-prefix"] = "X-Remote-Extra-"
	flags["proxy-client-cert-file"] = filepath.Join(cp.dir, "front-proxy-client.crt")
	flags["proxy-client-key-file"] = filepath.Join(cp.dir, "front-proxy-client.key")
	flags["enable-aggregator-routing"] = "true"
	return nil
}
