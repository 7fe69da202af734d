package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{
		"--kubeconfig=/k", "--hostname-override=Node-A", "--node-ip=192.0.2.7",
		"--node-labels=a=b,example.com/c=", "--register-node=false",
		"--node-status-update-frequency=3s", "--node-lease-duration-seconds=8",
		"--max-pods=20", "--system-reserved=cpu=500m,memory=1Gi", "--kube-reserved=memory=256Mi",
		"--disk-usage-path=/tmp", "--disk-usage-threshold=80", "--listen=", "-v=2",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	name, err := nodekit.NodeName(cfg.hostnameOverride)
	if err != nil || name != "node-a" {
		t.Errorf("nodeName() = %q, %v; want node-a", name, err)
	}
	if len(cfg.nodeIPs) != 1 || cfg.nodeIPs[0].String() != "192.0.2.7" {
		t.Errorf("nodeIPs = %v", cfg.nodeIPs)
	}
	if cfg.nodeLabels["a"] != "b" || cfg.nodeLabels["example.com/c"] != "" || len(cfg.nodeLabels) != 2 {
		t.Errorf("nodeLabels = %v", cfg.nodeLabels)
	}
	if cfg.registerNode || cfg.statusUpdateFrequency != 3*time.Second || cfg.statusReportFrequency != 0 ||
		cfg.leaseDuration != 8*time.Second || cfg.maxPods != 20 || cfg.listen != "" || cfg.diskUsageThreshold != 80 {
		t.Errorf("cfg = %+v", cfg)
	}
	if q := cfg.systemReserved[corev1.ResourceMemory]; q.String() != "1Gi" {
		t.Errorf("system-reserved memory = %s", q.String())
	}
	if q := cfg.kubeReserved[corev1.ResourceMemory]; q.String() != "256Mi" {
		t.Errorf("kube-reserved memory = %s", q.String())
	}

	def, err := parseFlags([]string{"--kubeconfig=/k"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !def.registerNode || def.leaseDuration != 40*time.Second || def.listen != defaultListen ||
		def.diskUsagePath != "/" || def.runtimeEndpoint != "" || def.maxPods != 110 || def.memoryLimit != 0 || def.runtimeRequestTimeout != 2*time.Minute {
		t.Errorf("defaults = %+v", def)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cgroup-driver=cgroupsd"}, "--cgroup-driver"},
		{[]string{"--file-check-frequency=10ms"}, "--file-check-frequency"},
		{[]string{"--pending-status-delay=11s"}, "--pending-status-delay"},
		{[]string{"--pending-status-delay=-1s"}, "--pending-status-delay"},
		{[]string{"--http-check-frequency=0s"}, "--http-check-frequency"},
		{[]string{"--manifest-url=ftp://x/y"}, "--manifest-url"},
		{[]string{"--manifest-url=http://x/y", "--manifest-url-header=nocolon"}, "flag -manifest-url-header: \"nocolon\" is not key:value"},
		{[]string{"--manifest-url-header=a:b"}, "--manifest-url-header needs --manifest-url"},
		{[]string{"--root-dir="}, "--root-dir"},
		{[]string{"--pod-log-root="}, "--pod-log-root"},
		{[]string{"--cgroup-root=kubepods"}, "--cgroup-root"},
		{[]string{"--container-log-max-size=lots"}, "--container-log-max-size"},
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps"},
		{[]string{"--kube-api-burst=0"}, "--kube-api-burst"},
		{[]string{"--container-log-max-size=100"}, "--container-log-max-size"},
		{[]string{"--container-log-max-files=1"}, "--container-log-max-files"},
		{[]string{"--container-log-monitor-interval=1s"}, "--container-log-monitor-interval"},
		{[]string{"--cluster-dns=10.0.0.10,dns"}, "--cluster-dns"},
		{[]string{"--cluster-domain=Not_A_Domain"}, "--cluster-domain"},
		{[]string{"--kubeconfig=k", "--node-ip=x"}, "--node-ip"},
		{[]string{"--kubeconfig=k", "--node-labels=novalue"}, "--node-labels"},
		{[]string{"--kubeconfig=k", "--node-labels=a b=c"}, "--node-labels"},
		{[]string{"--kubeconfig=k", "--system-reserved=cpu=lots"}, "--system-reserved"},
		{[]string{"--kubeconfig=k", "--kube-reserved=memory=-1Gi"}, "--kube-reserved"},
		{[]string{"--kubeconfig=k", "--node-lease-duration-seconds=0"}, "--node-lease-duration-seconds"},
		{[]string{"--runtime-down-after=100ms"}, "--runtime-down-after"},
		{[]string{"--runtime-request-timeout=100ms"}, "--runtime-request-timeout"},
		{[]string{"--runtime-request-timeout=2h"}, "--runtime-request-timeout"},
		{[]string{"--kubeconfig=k", "--node-status-update-frequency=-1s"}, "--node-status-update-frequency"},
		{[]string{"--kubeconfig=k", "--max-pods=-1"}, "--max-pods"},
		{[]string{"--kubeconfig=k", "--memory-limit=lots"}, "--memory-limit"},
		{[]string{"--kubeconfig=k", "--authorization-webhook-cache-unauthorized-ttl=-1s"}, "--authorization-webhook-cache-unauthorized-ttl"},
		{[]string{"--kubeconfig=k", "--authorization-webhook-cache-authorized-ttl=2h"}, "--authorization-webhook-cache-authorized-ttl"},
		{[]string{"--rotate-server-certificates"}, "--rotate-server-certificates needs --kubeconfig"},
		{[]string{"--kubeconfig=k", "--rotate-server-certificates", "--tls-cert-file=c", "--tls-private-key-file=k"}, "--rotate-server-certificates and --tls-cert-file"},
		{[]string{"--kubeconfig=k", "extra"}, "unexpected arguments"},
		{[]string{"--kubeconfig=k", "--no-such-flag"}, "no-such-flag"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := nodekit.NodeName("Not_Valid"); err == nil {
		t.Error("nodeName accepted an invalid name")
	}
}

func TestParsePodFlags(t *testing.T) {
	// No --kubeconfig: standalone, accepted.
	def, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if def.kubeconfig != "" || def.rootDir != "/var/lib/kubelet" || def.podLogRoot != "/var/log/pods" ||
		def.cgroupDriver != "cgroupfs" || def.fileCheckFrequency != 20*time.Second || def.httpCheckFrequency != 20*time.Second ||
		def.resolvConf != "/etc/resolv.conf" || def.podManifestPath != "" || def.manifestURL != "" {
		t.Errorf("pod defaults = %+v", def)
	}
	c, err := parseFlags([]string{"--pod-manifest-path=/etc/kubernetes/manifests", "--manifest-url=http://example.com/pods",
		"--manifest-url-header=X-A:1", "--manifest-url-header=X-A: 2", "--manifest-url-header=X-B:c:d",
		"--cgroup-driver=systemd", "--cluster-dns=10.0.0.10, fd00::a", "--cluster-domain=cluster.local", "--resolv-conf="}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.manifestURLHeader.Values("X-A"); len(got) != 2 || got[0] != "1" || got[1] != "2" || c.manifestURLHeader.Get("X-B") != "c:d" {
		t.Errorf("headers = %v", c.manifestURLHeader)
	}
	if c.cgroupDriver != "systemd" || len(c.clusterDNS) != 2 || c.clusterDNS[1] != "fd00::a" || c.resolvConf != "-" {
		t.Errorf("config = %+v", c)
	}
	err = func() error { _, err := parseFlags([]string{"--cgroup-driver=cgroupsd"}, io.Discard); return err }()
	if err == nil || !strings.Contains(err.Error(), `--cgroup-driver "cgroupsd" must be cgroupfs or systemd`) {
		t.Errorf("bad --cgroup-driver: %v", err)
	}
	if false {
		t.Error("nodeName accepted an invalid name")
	}
}

// The fake runtime makes a Ready node with the disk condition on a fake
// clientset: the composition without a control plane.
func TestAgentOnFakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := &config{hostnameOverride: "n1", registerNode: true, leaseDuration: 40 * time.Second,
		diskUsagePath: t.TempDir(), diskUsageThreshold: 99.9, maxPods: 110}
	rc := runtimetest.New(runtimetest.Options{NoCallLog: true})
	client := fake.NewClientset()
	tmpl := nodeTemplate(&config{nodeLabels: map[string]string{"x": "y"}}, "n1")
	// The node's pod CIDR reaches the runtime through the agent's runtime connection.
	tmpl.Spec.PodCIDR, tmpl.Spec.PodCIDRs = "10.244.7.0/24", []string{"10.244.7.0/24"}
	custom, err := customSetters(cfg)
	if err != nil {
		t.Fatal(err)
	}
	node := &nodekit.API{Nodes: client.CoreV1().Nodes(), Leases: client.CoordinationV1().Leases(lease.DefaultNamespace)}
	half, err := nodekit.NewNodeHalf(nodekit.NodeHalfOptions{NodeName: "n1", API: node, Node: tmpl, Status: statusOptions(cfg, "n1", rc), CustomSetters: custom})
	if err != nil {
		t.Fatal(err)
	}
	hb, setters := half.Heartbeat(), half.Setters()
	if i, j := setters.Index("DiskUsage"), setters.Index(nodestatus.SetterReady); i < 0 || i != j-1 {
		t.Errorf("DiskUsage at %d, Ready at %d; want DiskUsage just before Ready", i, j)
	}
	if setters.Index(nodestatus.SetterPodCIDR) != 0 {
		t.Errorf("PodCIDR setter at %d, want first: the agent's runtime must take the node's pod CIDRs", setters.Index(nodestatus.SetterPodCIDR))
	}
	if err := hb.SyncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.RuntimeConfig().GetNetworkConfig().GetPodCidr(); got != "10.244.7.0/24" {
		t.Errorf("runtime pod CIDR = %q, want 10.244.7.0/24", got)
	}
	if got.Labels["x"] != "y" || got.Labels[corev1.LabelHostname] != "n1" || got.Labels[corev1.LabelOSStable] == "" {
		t.Errorf("labels = %v", got.Labels)
	}
	if got := got.Status.NodeInfo.ContainerRuntimeVersion; got != "fake://1.0.0" {
		t.Errorf("containerRuntimeVersion = %q", got)
	}
	conds := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, c := range got.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if conds[corev1.NodeReady] != corev1.ConditionTrue || conds[nodestatus.DiskUsageCondition] == "" {
		t.Errorf("conditions = %v", conds)
	}
}

func TestParseSysctlFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--allowed-unsafe-sysctls=net.core.somaxconn,kernel.msg*"}, io.Discard)
	if err != nil || len(cfg.allowedUnsafeSysctls) != 2 || cfg.allowedUnsafeSysctls[0] != "net.core.somaxconn" || cfg.allowedUnsafeSysctls[1] != "kernel.msg*" {
		t.Fatalf("allowedUnsafeSysctls = %q, %v", cfg.allowedUnsafeSysctls, err)
	}
	if _, err := parseFlags([]string{"--allowed-unsafe-sysctls=not a sysctl"}, io.Discard); err == nil || !strings.HasPrefix(err.Error(), "--allowed-unsafe-sysctls: ") {
		t.Errorf("a bad sysctl: %v; want an error naming the flag", err)
	}
	path := writeConfig(t, configHeader+"allowedUnsafeSysctls: [net.core.somaxconn]\n")
	if cfg, err := parseFlags([]string{"--config", path}, io.Discard); err != nil {
		t.Errorf("allowedUnsafeSysctls in the file: %v", err)
	} else if len(cfg.allowedUnsafeSysctls) != 1 || cfg.allowedUnsafeSysctls[0] != "net.core.somaxconn" {
		t.Errorf("allowedUnsafeSysctls from the file = %q", cfg.allowedUnsafeSysctls)
	}
}
