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

// The --config file is kubelet's KubeletConfiguration. It is decoded by the
// flag table (flagDef.field and .kind), each field applied as the flag it
// matches, rather than through k8s.io/kubelet's types: those link
// component-base's configuration and logging machinery into the binary for
// fields the agent rejects anyway.
const (
	kubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
	kubeletConfigKind       = "KubeletConfiguration"
)

// kubeletConfigFields are the KubeletConfiguration (v1beta1) fields this
// agent does not support: set in a --config file, they are an error that
// says so, rather than one that calls a kubelet field unknown.
var kubeletConfigFields = strings.Fields(`enableServer readOnlyPort tlsCipherSuites tlsCurvePreferences tlsMinVersion rotateCertificates authentication authorization registryPullQPS
	registryBurst imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist eventRecordQPS eventBurst enableDebuggingHandlers
	enableContentionProfiling oomScoreAdj streamingConnectionIdleTimeout imageMaximumGCAge volumeStatsAggPeriod kubeletCgroups systemCgroups
	cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions cpuManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy topologyManagerScope
	topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode podCIDR podPidsLimit runOnce cpuCFSQuota cpuCFSQuotaPeriod
	nodeStatusMaxImages maxOpenFiles contentType serializeImagePulls maxParallelImagePulls mergeDefaultEvictionSettings enableControllerAttachDetach
	protectKernelDefaults makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit featureGates failSwapOn memorySwap containerLogMaxWorkers
	configMapAndSecretChangeDetectionStrategy reservedSystemCPUs showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup
	enforceNodeAllocatable allowedUnsafeSysctls defaultPodSysctls volumePluginDir kernelMemcgNotification logging enableSystemLogHandler
	enableSystemLogQuery shutdownGracePeriod shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory
	enableProfilingHandler enableDebugFlagsHandler memoryThrottlingFactor memoryReservationPolicy tracing localStorageCapacityIsolation
	imageServiceEndpoint failCgroupV1 userNamespaces`)

// A fileKind turns a --config field's JSON value into the values its flag
// is set to.
type fileKind func(raw json.RawMessage) ([]string, error)

// decode is the fileKind of fields whose value decodes strictly into a T
// that format writes as flag values.
func decode[T any](format func(T) []string) fileKind {
	return func(raw json.RawMessage) ([]string, error) {
		var v T
		err := strict(raw, &v)
		return format(v), err
	}
}

// one is decode for a T written as one flag value.
func one[T any](format func(T) string) fileKind {
	return decode(func(v T) []string { return []string{format(v)} })
}

var (
	asString   = one(func(s string) string { return s })
	asDuration = one(func(d metav1.Duration) string { return d.Duration.String() })
	asInt      = one(func(i int32) string { return strconv.Itoa(int(i)) })
	asBool     = one(strconv.FormatBool)
	asList     = one(func(l []string) string { return strings.Join(l, ",") })
	// asHeaders is staticPodURLHeader, repeated key:value flag values.
	asHeaders = decode(func(h map[string][]string) (out []string) {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			for _, v := range h[k] {
				out = append(out, k+":"+v)
			}
		}
		return out
	})
	asTaints = one(func(taints []corev1.Taint) string {
		var parts []string
		for _, t := range taints {
			if s := t.Key; t.Value == "" {
				parts = append(parts, s+":"+string(t.Effect))
			} else {
				parts = append(parts, s+"="+t.Value+":"+string(t.Effect))
			}
		}
		return strings.Join(parts, ",")
	})
)

// asPairs is a map (of resources, of eviction signals) written as its flag's
// "key<sep>value,..." form.
func asPairs(sep string) fileKind {
	return one(func(m map[string]string) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+sep+m[k])
		}
		return strings.Join(parts, ",")
	})
}

// strict decodes raw into v, rejecting fields v does not have.
func strict(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// applyConfigFile reads the KubeletConfiguration at path and sets, for
// every field of defs it has, the flag, unless that flag was given on the
// command line (set): the command line overrides the file, as with kubelet.
// Errors start with "--config <path>:" and name the field. It returns the
// flags it set, with the field that set each.
func applyConfigFile(fs *flag.FlagSet, defs []flagDef, path string, set map[string]bool) (map[string]string, error) {
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
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		switch {
		case slices.Contains([]string{"apiVersion", "kind", "healthzBindAddress", "healthzPort"}, name) || slices.ContainsFunc(defs, func(d flagDef) bool { return d.field == name }):
		case slices.Contains(kubeletConfigFields, name):
			return nil, fail("field %q is not supported by this agent", name)
		default:
			return nil, fail("unknown field %q", name)
		}
	}
	fromFile := map[string]string{}
	for _, d := range defs {
		raw, ok := fields[d.field]
		if d.field == "" || !ok || set[d.name] || string(raw) == "null" {
			continue
		}
		values, err := d.kind(raw)
		if err != nil {
			return nil, fail("field %q: %v", d.field, err)
		}
		for _, v := range values {
			if err := fs.Set(d.name, v); err != nil {
				return nil, fail("field %q: %v", d.field, err)
			}
		}
		fromFile[d.name] = d.field
	}
	// healthzBindAddress (default 127.0.0.1) and healthzPort (default
	// 10248; 0 turns the endpoint off) together are --listen.
	host, port, given := "127.0.0.1", int32(10248), false
	for _, h := range []struct {
		field string
		v     any
	}{{"healthzBindAddress", &host}, {"healthzPort", &port}} {
		if raw, ok := fields[h.field]; ok {
			if err := strict(raw, h.v); err != nil {
				return nil, fail("field %q: %v", h.field, err)
			}
			given = true
		}
	}
	if port < 0 || port > 65535 {
		return nil, fail("field %q: %d is not a port", "healthzPort", port)
	} else if !given || set["listen"] {
		return fromFile, nil
	}
	listen := ""
	if port != 0 {
		listen = net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	if err := fs.Set("listen", listen); err != nil {
		return nil, fail("fields healthzBindAddress/healthzPort: %v", err)
	}
	fromFile["listen"] = "healthzBindAddress/healthzPort"
	return fromFile, nil
}
