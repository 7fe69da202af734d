package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const configHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestConfigFile(t *testing.T) {
	path := writeConfig(t, configHeader+`
staticPodPath: /etc/kubernetes/manifests
fileCheckFrequency: 5s
httpCheckFrequency: 1m
staticPodURL: http://example.com/pods
staticPodURLHeader:
  Authorization: ["Bearer x"]
  X-Node: [a, b]
syncFrequency: 30s
podLogsDir: /var/log/mypods
nodeStatusUpdateFrequency: 4s
nodeStatusReportFrequency: 1m
nodeLeaseDurationSeconds: 20
cgroupDriver: systemd
cgroupRoot: /custom
clusterDNS: [10.96.0.10, 10.96.0.11]
clusterDomain: cluster.local
resolvConf: ""
maxPods: 20
podsPerCore: 4
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
runtimeRequestTimeout: 30s
volumeStatsAggPeriod: 2m
registerNode: false
registerWithTaints:
- key: dedicated
  value: edge
  effect: NoSchedule
- key: drain
  effect: NoExecute
providerID: edge://n1
systemReserved: {cpu: 500m, memory: 1Gi}
kubeReserved: {memory: 256Mi}
seccompDefault: true
cgroupsPerQOS: false
kubeAPIQPS: 20
kubeAPIBurst: 40
containerLogMaxSize: 5Mi
containerLogMaxFiles: 3
containerLogMonitorInterval: 30s
healthzBindAddress: 0.0.0.0
healthzPort: 10300
serverTLSBootstrap: true
`)
	// The command line overrides the file, whatever the order.
	cfg, err := parseFlags([]string{"--max-pods=5", "--config", path, "--cluster-domain=example.org", "--kubeconfig=k"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.podManifestPath != "/etc/kubernetes/manifests" || cfg.fileCheckFrequency != 5*time.Second || cfg.httpCheckFrequency != time.Minute ||
		cfg.manifestURL != "http://example.com/pods" || cfg.syncFrequency != 30*time.Second || cfg.podLogRoot != "/var/log/mypods" ||
		cfg.statusUpdateFrequency != 4*time.Second || cfg.statusReportFrequency != time.Minute || cfg.leaseDuration != 20*time.Second ||
		cfg.cgroupDriver != "systemd" || cfg.cgroupRoot != "/custom" || strings.Join(cfg.clusterDNS, ",") != "10.96.0.10,10.96.0.11" ||
		cfg.resolvConf != "-" || cfg.podsPerCore != 4 || cfg.runtimeEndpoint != "unix:///run/containerd/containerd.sock" || cfg.runtimeRequestTimeout != 30*time.Second || cfg.volumeStatsAggPeriod != 2*time.Minute ||
		cfg.registerNode || cfg.providerID != "edge://n1" || !cfg.seccompDefault || cfg.listen != "0.0.0.0:10300" ||
		cfg.cgroupsPerQOS || cfg.kubeAPIQPS != 20 || cfg.kubeAPIBurst != 40 || cfg.logMaxSize != 5<<20 || cfg.logMaxFiles != 3 || cfg.logMonitorInterval != 30*time.Second || !cfg.serverTLS {
		t.Errorf("cfg = %+v", cfg)
	}
	if cfg.maxPods != 5 || cfg.clusterDomain != "example.org" {
		t.Errorf("flags did not override the file: maxPods %d, clusterDomain %q", cfg.maxPods, cfg.clusterDomain)
	}
	if got := cfg.manifestURLHeader["Authorization"]; len(got) != 1 || got[0] != "Bearer x" {
		t.Errorf("Authorization header %q", got)
	}
	if got := cfg.manifestURLHeader["X-Node"]; strings.Join(got, ",") != "a,b" {
		t.Errorf("X-Node header %q", got)
	}
	want := []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}, {Key: "drain", Effect: corev1.TaintEffectNoExecute}}
	if len(cfg.registerWithTaints) != 2 || cfg.registerWithTaints[0] != want[0] || cfg.registerWithTaints[1] != want[1] {
		t.Errorf("taints %+v", cfg.registerWithTaints)
	}
	if q := cfg.systemReserved[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("systemReserved cpu %s", q.String())
	}
	if q := cfg.kubeReserved[corev1.ResourceMemory]; q.String() != "256Mi" {
		t.Errorf("kubeReserved memory %s", q.String())
	}
	tmpl := nodeTemplate(cfg, "n1")
	if tmpl.Spec.ProviderID != "edge://n1" || len(tmpl.Spec.Taints) != 2 {
		t.Errorf("node template spec %+v", tmpl.Spec)
	}

	// Flags override the file's header list as a whole, and healthzPort 0
	// turns the endpoint off.
	path = writeConfig(t, configHeader+"staticPodURL: http://example.com/pods\nstaticPodURLHeader: {A: [file]}\nhealthzPort: 0\n")
	cfg, err = parseFlags([]string{"--config=" + path, "--manifest-url-header=B:flag"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.manifestURLHeader) != 1 || cfg.manifestURLHeader.Get("B") != "flag" || cfg.listen != "" {
		t.Errorf("headers %v, listen %q", cfg.manifestURLHeader, cfg.listen)
	}

	// The defaults hold for what the file leaves out.
	cfg, err = parseFlags([]string{"--config=" + writeConfig(t, configHeader)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.maxPods != 110 || cfg.podsPerCore != 0 || cfg.syncFrequency != time.Minute || cfg.listen != defaultListen {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unsupported", configHeader + "registryPullQPS: 5\n", `field "registryPullQPS" is not supported by this agent`},
		{"unknown", configHeader + "maxPod: 3\n", `unknown field "maxPod"`},
		{"apiVersion", "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", `apiVersion "kubelet.config.k8s.io/v1" is not kubelet.config.k8s.io/v1beta1`},
		{"no apiVersion", "kind: KubeletConfiguration\n", `apiVersion "" is not kubelet.config.k8s.io/v1beta1`},
		{"kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", `kind "KubeProxyConfiguration" is not KubeletConfiguration`},
		{"type", configHeader + "maxPods: many\n", `field "maxPods": json: cannot unmarshal string`},
		{"duration", configHeader + "syncFrequency: soon\n", `field "syncFrequency": time: invalid duration "soon"`},
		{"nested unknown", configHeader + "registerWithTaints: [{key: a, effect: NoSchedule, colour: red}]\n", `field "registerWithTaints": json: unknown field "colour"`},
		{"bad taint effect", configHeader + "registerWithTaints: [{key: a, effect: Sometimes}]\n", `field "registerWithTaints": --register-with-taints: taint "a": effect "Sometimes" must be NoSchedule, PreferNoSchedule or NoExecute`},
		{"bad value", configHeader + "cgroupDriver: cgroupsd\n", `field "cgroupDriver": --cgroup-driver "cgroupsd" must be cgroupfs or systemd`},
		{"bad resource", configHeader + "systemReserved: {cpu: lots}\n", `field "systemReserved": --system-reserved: cpu: quantities must match`},
		{"volume stats off", configHeader + "volumeStatsAggPeriod: 0s\n", `field "volumeStatsAggPeriod": --volume-stats-agg-period`},
		{"not yaml", configHeader + "maxPods: [\n", "--config "},
		{"list", "- a\n", "not a KubeletConfiguration object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.body)
			_, err := parseFlags([]string{"--config", path}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "--config "+path+": ") {
				t.Errorf("err = %v, want it to start with the file", err)
			}
		})
	}
	if _, err := parseFlags([]string{"--config=/nonexistent/kubelet.yaml"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--config: open /nonexistent/kubelet.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseTaints(t *testing.T) {
	got, err := parseTaints("a=b:NoSchedule,example.com/c:NoExecute")
	if err != nil || len(got) != 2 || got[0] != (corev1.Taint{Key: "a", Value: "b", Effect: "NoSchedule"}) || got[1] != (corev1.Taint{Key: "example.com/c", Effect: "NoExecute"}) {
		t.Fatalf("parseTaints = %+v, %v", got, err)
	}
	for _, bad := range []string{"a=b", "a:Never", "-a:NoSchedule", "a=b c:NoSchedule"} {
		if _, err := parseTaints(bad); err == nil {
			t.Errorf("parseTaints(%q) succeeded", bad)
		}
	}
	if _, err := parseFlags([]string{"--register-with-taints=a:Never"}, io.Discard); err == nil || !strings.HasPrefix(err.Error(), "--register-with-taints: ") {
		t.Errorf("err = %v", err)
	}
	if _, err := parseFlags([]string{"--pods-per-core=-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--pods-per-core") {
		t.Errorf("err = %v", err)
	}
	if _, err := parseFlags([]string{"--sync-frequency=10ms"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--sync-frequency") {
		t.Errorf("err = %v", err)
	}
}
