package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The --config file is kubelet's KubeletConfiguration. It is decoded into
// the agent's own table of the fields it supports, each applied as the
// flag it matches, rather than through k8s.io/kubelet's types: those link
// component-base's configuration and logging machinery into the binary for
// fields the agent rejects anyway.
const (
	kubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
	kubeletConfigKind       = "KubeletConfiguration"
)

// configField is a KubeletConfiguration field the agent supports: the flag
// it sets and how its JSON value becomes that flag's values.
type configField struct {
	name  string
	flag  string
	value func(raw json.RawMessage) ([]string, error)
}

// configFields are the supported fields, in the order they are applied.
var configFields = []configField{
	{"staticPodPath", "pod-manifest-path", stringValue},
	{"fileCheckFrequency", "file-check-frequency", durationValue},
	{"httpCheckFrequency", "http-check-frequency", durationValue},
	{"staticPodURL", "manifest-url", stringValue},
	{"staticPodURLHeader", "manifest-url-header", headerValue},
	{"syncFrequency", "sync-frequency", durationValue},
	{"podLogsDir", "pod-log-root", stringValue},
	{"nodeStatusUpdateFrequency", "node-status-update-frequency", durationValue},
	{"nodeStatusReportFrequency", "node-status-report-frequency", durationValue},
	{"nodeLeaseDurationSeconds", "node-lease-duration-seconds", intValue},
	{"cgroupDriver", "cgroup-driver", stringValue},
	{"cgroupRoot", "cgroup-root", stringValue},
	{"clusterDNS", "cluster-dns", listValue},
	{"clusterDomain", "cluster-domain", stringValue},
	{"resolvConf", "resolv-conf", stringValue},
	{"maxPods", "max-pods", intValue},
	{"podsPerCore", "pods-per-core", intValue},
	{"containerRuntimeEndpoint", "container-runtime-endpoint", stringValue},
	{"registerNode", "register-node", boolValue},
	{"registerWithTaints", "register-with-taints", taintsValue},
	{"providerID", "provider-id", stringValue},
	{"systemReserved", "system-reserved", resourcesValue},
	{"kubeReserved", "kube-reserved", resourcesValue},
	{"seccompDefault", "seccomp-default", boolValue},
	{"cgroupsPerQOS", "cgroups-per-qos", boolValue},
	{"kubeAPIQPS", "kube-api-qps", intValue},
	{"kubeAPIBurst", "kube-api-burst", intValue},
	{"containerLogMaxSize", "container-log-max-size", stringValue},
	{"containerLogMaxFiles", "container-log-max-files", intValue},
	{"containerLogMonitorInterval", "container-log-monitor-interval", durationValue},
	{"address", "address", stringValue},
	{"port", "port", intValue},
	{"tlsCertFile", "tls-cert-file", stringValue},
	{"tlsPrivateKeyFile", "tls-private-key-file", stringValue},
	{"serverTLSBootstrap", "rotate-server-certificates", boolValue},
	{"evictionHard", "eviction-hard", signalMapValue("<")},
	{"evictionSoft", "eviction-soft", signalMapValue("<")},
	{"evictionSoftGracePeriod", "eviction-soft-grace-period", signalMapValue("=")},
	{"evictionMinimumReclaim", "eviction-minimum-reclaim", signalMapValue("=")},
	{"evictionPressureTransitionPeriod", "eviction-pressure-transition-period", durationValue},
	{"evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", intValue},
	{"imageGCHighThresholdPercent", "image-gc-high-threshold", intValue},
	{"imageGCLowThresholdPercent", "image-gc-low-threshold", intValue},
	{"imageMinimumGCAge", "minimum-image-ttl-duration", durationValue},
	// healthzBindAddress and healthzPort together are --listen.
}

// kubeletConfigFields are the KubeletConfiguration (v1beta1) fields this
// agent does not support: set in a --config file, they are an error that
// says so, rather than one that calls a kubelet field unknown.
var kubeletConfigFields = []string{
	"enableServer", "readOnlyPort", "tlsCipherSuites",
	"tlsCurvePreferences", "tlsMinVersion", "rotateCertificates", "authentication", "authorization",
	"registryPullQPS", "registryBurst", "imagePullCredentialsVerificationPolicy", "preloadedImagesVerificationAllowlist",
	"eventRecordQPS", "eventBurst", "enableDebuggingHandlers", "enableContentionProfiling", "oomScoreAdj",
	"streamingConnectionIdleTimeout", "imageMaximumGCAge", "volumeStatsAggPeriod", "kubeletCgroups", "systemCgroups",
	"cpuManagerPolicy", "singleProcessOOMKill", "cpuManagerPolicyOptions", "cpuManagerReconcilePeriod",
	"memoryManagerPolicy", "topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions", "qosReserved",
	"runtimeRequestTimeout", "hairpinMode", "podCIDR", "podPidsLimit", "runOnce", "cpuCFSQuota", "cpuCFSQuotaPeriod",
	"nodeStatusMaxImages", "maxOpenFiles", "contentType", "serializeImagePulls",
	"maxParallelImagePulls", "mergeDefaultEvictionSettings", "enableControllerAttachDetach",
	"protectKernelDefaults", "makeIPTablesUtilChains", "iptablesMasqueradeBit", "iptablesDropBit", "featureGates",
	"failSwapOn", "memorySwap", "containerLogMaxWorkers", "configMapAndSecretChangeDetectionStrategy", "reservedSystemCPUs",
	"showHiddenMetricsForVersion", "systemReservedCgroup", "kubeReservedCgroup", "enforceNodeAllocatable",
	"allowedUnsafeSysctls", "defaultPodSysctls", "volumePluginDir", "kernelMemcgNotification", "logging",
	"enableSystemLogHandler", "enableSystemLogQuery", "shutdownGracePeriod", "shutdownGracePeriodCriticalPods",
	"shutdownGracePeriodByPodPriority", "crashLoopBackOff", "reservedMemory", "enableProfilingHandler",
	"enableDebugFlagsHandler", "memoryThrottlingFactor", "memoryReservationPolicy", "tracing",
	"localStorageCapacityIsolation", "imageServiceEndpoint", "failCgroupV1", "userNamespaces",
}

// applyConfigFile reads the KubeletConfiguration at path and sets, for
// every field it has, the matching flag, unless that flag was given on the
// command line (set): the command line overrides the file, as with kubelet.
// Errors start with "--config <path>:" and name the field. It returns the
// flags it set, with the field that set each.
func applyConfigFile(fs *flag.FlagSet, path string, set map[string]bool) (map[string]string, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("--config %s: "+format, append([]any{path}, a...)...)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fail("%v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil || fields == nil {
		return nil, fail("not a KubeletConfiguration object")
	}
	var apiVersion, kind string
	_ = json.Unmarshal(fields["apiVersion"], &apiVersion)
	_ = json.Unmarshal(fields["kind"], &kind)
	if apiVersion != kubeletConfigAPIVersion {
		return nil, fail("apiVersion %q is not %s", apiVersion, kubeletConfigAPIVersion)
	}
	if kind != kubeletConfigKind {
		return nil, fail("kind %q is not %s", kind, kubeletConfigKind)
	}
	delete(fields, "apiVersion")
	delete(fields, "kind")

	var names []string
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case name == "healthzBindAddress" || name == "healthzPort" || slices.ContainsFunc(configFields, func(f configField) bool { return f.name == name }):
		case slices.Contains(kubeletConfigFields, name):
			return nil, fail("field %q is not supported by this agent", name)
		default:
			return nil, fail("unknown field %q", name)
		}
	}
	fromFile := map[string]string{}
	for _, f := range configFields {
		raw, ok := fields[f.name]
		if !ok || set[f.flag] || string(raw) == "null" {
			continue
		}
		values, err := f.value(raw)
		if err != nil {
			return nil, fail("field %q: %v", f.name, err)
		}
		for _, v := range values {
			if err := fs.Set(f.flag, v); err != nil {
				return nil, fail("field %q: %v", f.name, err)
			}
		}
		fromFile[f.flag] = f.name
	}
	if listen, ok, err := healthzListen(fields); err != nil {
		return nil, fail("%v", err)
	} else if ok && !set["listen"] {
		if err := fs.Set("listen", listen); err != nil {
			return nil, fail("fields healthzBindAddress/healthzPort: %v", err)
		}
		fromFile["listen"] = "healthzBindAddress/healthzPort"
	}
	return fromFile, nil
}

// strict decodes raw into v, rejecting fields v does not have.
func strict(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// signalMapValue turns a map of eviction signals (evictionHard: {"memory.available": "100Mi"})
// into its flag's "signal<value,..." (sep "<") or "signal=value,..." form.
func signalMapValue(sep string) func(raw json.RawMessage) ([]string, error) {
	return func(raw json.RawMessage) ([]string, error) {
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		parts := make([]string, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+sep+m[k])
		}
		return []string{strings.Join(parts, ",")}, nil
	}
}

func stringValue(raw json.RawMessage) ([]string, error) {
	var s string
	err := strict(raw, &s)
	return []string{s}, err
}

func durationValue(raw json.RawMessage) ([]string, error) {
	var d metav1.Duration
	err := strict(raw, &d)
	return []string{d.Duration.String()}, err
}

func intValue(raw json.RawMessage) ([]string, error) {
	var i int32
	err := strict(raw, &i)
	return []string{strconv.Itoa(int(i))}, err
}

func boolValue(raw json.RawMessage) ([]string, error) {
	var b bool
	err := strict(raw, &b)
	return []string{strconv.FormatBool(b)}, err
}

func listValue(raw json.RawMessage) ([]string, error) {
	var l []string
	err := strict(raw, &l)
	return []string{strings.Join(l, ",")}, err
}

// headerValue turns staticPodURLHeader (a map of header names to values)
// into repeated key:value flag values.
func headerValue(raw json.RawMessage) ([]string, error) {
	var h map[string][]string
	if err := strict(raw, &h); err != nil {
		return nil, err
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			out = append(out, k+":"+v)
		}
	}
	return out, nil
}

func resourcesValue(raw json.RawMessage) ([]string, error) {
	var m map[string]string
	if err := strict(raw, &m); err != nil {
		return nil, err
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return []string{strings.Join(parts, ",")}, nil
}

func taintsValue(raw json.RawMessage) ([]string, error) {
	var taints []corev1.Taint
	if err := strict(raw, &taints); err != nil {
		return nil, err
	}
	var parts []string
	for _, t := range taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		parts = append(parts, s+":"+string(t.Effect))
	}
	return []string{strings.Join(parts, ",")}, nil
}

// healthzListen is --listen from healthzBindAddress (default 127.0.0.1) and
// healthzPort (default 10248; 0 turns the endpoint off), if either is set.
func healthzListen(fields map[string]json.RawMessage) (string, bool, error) {
	rawAddr, okAddr := fields["healthzBindAddress"]
	rawPort, okPort := fields["healthzPort"]
	if !okAddr && !okPort {
		return "", false, nil
	}
	host, port := "127.0.0.1", int32(10248)
	if okAddr {
		if err := strict(rawAddr, &host); err != nil {
			return "", false, fmt.Errorf("field %q: %v", "healthzBindAddress", err)
		}
	}
	if okPort {
		if err := strict(rawPort, &port); err != nil {
			return "", false, fmt.Errorf("field %q: %v", "healthzPort", err)
		}
	}
	if port == 0 {
		return "", true, nil
	}
	if port < 0 || port > 65535 {
		return "", false, fmt.Errorf("field %q: %d is not a port", "healthzPort", port)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), true, nil
}
