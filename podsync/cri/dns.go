package cri

import (
	"bufio"
	"bytes"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	maxDNSServers  = 3
	maxDNSSearches = 32
)

// parseResolvConf reads nameservers, search domains and options.
func parseResolvConf(data []byte) (servers, searches, options []string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				servers = append(servers, f[1])
			}
		case "search":
			searches = f[1:] // the last search line wins
		case "options":
			options = append(options, f[1:]...)
		}
	}
	return servers, searches, options
}

// dnsConfig is the kubelet's DNS configuration of a pod. hostResolv is the
// node's resolv.conf (nil: none).
func dnsConfig(pod *corev1.Pod, clusterDNS []string, clusterDomain string, hostResolv []byte) *runtimeapi.DNSConfig {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if (policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet) && len(clusterDNS) == 0 {
		policy = corev1.DNSDefault // no cluster DNS configured: the kubelet falls back to the host's
	}
	hs, hsearch, hopts := parseResolvConf(hostResolv)
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case corev1.DNSNone:
	case corev1.DNSDefault:
		cfg.Servers, cfg.Searches, cfg.Options = hs, hsearch, hopts
	default:
		cfg.Servers = append([]string(nil), clusterDNS...)
		if clusterDomain != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
		}
		cfg.Searches = append(cfg.Searches, hsearch...)
		cfg.Options = []string{"ndots:5"}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = append(cfg.Servers, dc.Nameservers...)
		cfg.Searches = append(cfg.Searches, dc.Searches...)
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	cfg.Servers = dedup(cfg.Servers)
	if len(cfg.Servers) > maxDNSServers {
		cfg.Servers = cfg.Servers[:maxDNSServers]
	}
	cfg.Searches = dedup(cfg.Searches)
	if len(cfg.Searches) > maxDNSSearches {
		cfg.Searches = cfg.Searches[:maxDNSSearches]
	}
	return cfg
}

// mergeDNSOptions overrides options by name with the pod's.
func mergeDNSOptions(base []string, pod []corev1.PodDNSConfigOption) []string {
	out := make([]string, 0, len(base)+len(pod))
	idx := map[string]int{}
	add := func(name, opt string) {
		if i, ok := idx[name]; ok {
			out[i] = opt
			return
		}
		idx[name] = len(out)
		out = append(out, opt)
	}
	for _, o := range base {
		add(strings.SplitN(o, ":", 2)[0], o)
	}
	for _, o := range pod {
		opt := o.Name
		if o.Value != nil {
			opt += ":" + *o.Value
		}
		add(o.Name, opt)
	}
	return out
}

func dedup(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// podHostname returns the sandbox hostname (empty on the host network).
func podHostname(pod *corev1.Pod, clusterDomain string) string {
	if pod.Spec.HostNetwork {
		return ""
	}
	if o := pod.Spec.HostnameOverride; o != nil && *o != "" {
		return *o // takes precedence over hostname and subdomain
	}
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	h = truncateHostname(h, 63)
	if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && pod.Spec.Subdomain != "" && clusterDomain != "" {
		fqdn := h + "." + pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + clusterDomain
		if len(fqdn) <= 64 {
			return fqdn
		}
	}
	return h
}

func truncateHostname(h string, n int) string {
	if len(h) <= n {
		return h
	}
	return strings.TrimRight(h[:n], "-.")
}
