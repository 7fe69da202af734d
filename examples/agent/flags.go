package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// config is what the command line says. Zero durations mean "not given", so
// that the packages apply kubelet's rules for defaults that depend on each
// other (the report frequency follows an explicitly set update frequency).
type config struct {
	kubeconfig            string
	hostnameOverride      string
	nodeIPs               []net.IP
	nodeLabels            map[string]string
	registerNode          bool
	statusUpdateFrequency time.Duration
	statusReportFrequency time.Duration
	leaseDuration         time.Duration
	runtimeEndpoint       string
	maxPods               int
	systemReserved        corev1.ResourceList
	kubeReserved          corev1.ResourceList
	diskUsagePath         string
	diskUsageThreshold    float64
	diskUsageResource     string
	listen                string
	memoryLimit           int64
}

// defaultListen is kubelet's healthz address.
const defaultListen = "127.0.0.1:10248"

// parseFlags parses args (without the program name). Errors name the flag.
// klog's flags (-v, -vmodule, ...) are registered on the same set.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	klog.InitFlags(fs)

	c := &config{}
	var (
		nodeIP, labels, sysRes, kubeRes string
		leaseSeconds                    int
		memLimit                        string
	)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to the kubeconfig of the node's identity (system:node:<name>). Required.")
	fs.StringVar(&c.hostnameOverride, "hostname-override", "", "Node name and Hostname address to use instead of the host name (lower-cased).")
	fs.StringVar(&nodeIP, "node-ip", "", "Comma-separated node IPs (one per family) to report as InternalIP. Default: the default-route address.")
	fs.StringVar(&labels, "node-labels", "", "Labels to add when registering the node: key=value pairs separated by commas.")
	fs.BoolVar(&c.registerNode, "register-node", true, "Register the node with the API server. When false the Node must exist; only its status is written.")
	fs.DurationVar(&c.statusUpdateFrequency, "node-status-update-frequency", 0, "How often node status is computed (default 10s).")
	fs.DurationVar(&c.statusReportFrequency, "node-status-report-frequency", 0, "How often an unchanged status is posted (default 5m, or the update frequency when only that is given).")
	fs.IntVar(&leaseSeconds, "node-lease-duration-seconds", 40, "Duration of the node lease; it is renewed every quarter of it.")
	fs.StringVar(&c.runtimeEndpoint, "container-runtime-endpoint", "", "CRI endpoint, for example unix:///run/containerd/containerd.sock. Empty: an in-memory fake runtime.")
	fs.IntVar(&c.maxPods, "max-pods", 110, "Pods capacity of the node.")
	fs.StringVar(&sysRes, "system-reserved", "", "Resources reserved for the system, for example cpu=500m,memory=1Gi.")
	fs.StringVar(&kubeRes, "kube-reserved", "", "Resources reserved for Kubernetes daemons, for example cpu=100m,memory=256Mi.")
	fs.StringVar(&c.diskUsagePath, "disk-usage-path", "/", "Directory whose file system the custom DiskUsageHigh condition reports on. Empty: no such condition.")
	fs.Float64Var(&c.diskUsageThreshold, "disk-usage-threshold", 90, "Usage in percent at or above which DiskUsageHigh is True.")
	fs.StringVar(&c.diskUsageResource, "disk-usage-resource", "", "Extended resource name (for example example.com/scratch) under which to also report the file system's size. Empty: none.")
	fs.StringVar(&c.listen, "listen", defaultListen, "Local address for /healthz and /metrics. Empty: do not serve.")
	fs.StringVar(&memLimit, "memory-limit", "24Mi", "Soft memory limit of the Go runtime (debug.SetMemoryLimit) unless GOMEMLIMIT is set. 0: none.")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.kubeconfig == "" {
		return nil, fmt.Errorf("--kubeconfig is required")
	}
	var err error
	if c.nodeIPs, err = parseNodeIPs(nodeIP); err != nil {
		return nil, fmt.Errorf("--node-ip: %w", err)
	}
	if c.nodeLabels, err = parseLabels(labels); err != nil {
		return nil, fmt.Errorf("--node-labels: %w", err)
	}
	if c.systemReserved, err = parseResources(sysRes); err != nil {
		return nil, fmt.Errorf("--system-reserved: %w", err)
	}
	if c.kubeReserved, err = parseResources(kubeRes); err != nil {
		return nil, fmt.Errorf("--kube-reserved: %w", err)
	}
	if leaseSeconds < 1 || leaseSeconds > 3600 {
		return nil, fmt.Errorf("--node-lease-duration-seconds %d must be between 1 and 3600", leaseSeconds)
	}
	c.leaseDuration = time.Duration(leaseSeconds) * time.Second
	if c.statusUpdateFrequency < 0 || c.statusReportFrequency < 0 {
		return nil, fmt.Errorf("--node-status-update-frequency and --node-status-report-frequency must not be negative")
	}
	if c.maxPods < 0 {
		return nil, fmt.Errorf("--max-pods %d must not be negative", c.maxPods)
	}
	if c.diskUsagePath != "" {
		if c.diskUsagePath, err = filepath.Abs(c.diskUsagePath); err != nil {
			return nil, fmt.Errorf("--disk-usage-path: %w", err)
		}
	}
	if memLimit != "0" && memLimit != "" {
		q, err := resource.ParseQuantity(memLimit)
		if err != nil {
			return nil, fmt.Errorf("--memory-limit: %w", err)
		}
		c.memoryLimit = q.Value()
	}
	return c, nil
}

// nodeName is the name the node registers under: --hostname-override, else
// the host name, lower-cased as kubelet does.
func (c *config) nodeName() (string, error) {
	name := c.hostnameOverride
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("host name: %w", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("node name %q: %s", name, strings.Join(errs, "; "))
	}
	return name, nil
}

func parseNodeIPs(s string) ([]net.IP, error) {
	if s == "" {
		return nil, nil
	}
	var ips []net.IP
	for _, part := range strings.Split(s, ",") {
		ip := net.ParseIP(strings.TrimSpace(part))
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address", part)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

func parseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %q value %q: %s", k, v, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

func parseResources(s string) (corev1.ResourceList, error) {
	if s == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not name=quantity", kv)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: %s is negative", k, v)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
