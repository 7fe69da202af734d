package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
)

// ErrConfig marks a container configuration the kubelet would refuse
// (CreateContainerConfigError): an env var from a ConfigMap or Secret, a
// field reference it cannot resolve, a hostPath of the wrong type.
var ErrConfig = errors.New("container config error")

// configError is an ErrConfig whose message is its cause's alone, as the
// kubelet reports an env source it cannot read (`configmap "x" not found`).
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{ErrConfig, e.err} }

// builder turns pods into CRI configs. Fields are set by New.
type builder struct {
	podLogRoot     string
	podRoot        string
	cgroupDriver   string
	cgroupRoot     string
	clusterDNS     []string
	clusterDomain  string
	resolvConf     []byte
	nodeName       string
	hostIPs        []string
	memoryCapacity int64
	seccompDefault bool
	seccompRoot    string  // Localhost seccomp profiles are relative to it
	appArmor       bool    // the host enforces AppArmor
	data           PodData // nil: emptyDir on disk and hostPath only
}

func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// seccomp is container c's seccomp profile as the kubelet chooses it: the
// container's, else the pod's, else RuntimeDefault with SeccompDefault and
// Unconfined without; a Localhost profile is a file below the seccomp
// profile root.
func (b *builder) seccomp(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.SecurityProfile, error) {
	var p *corev1.SeccompProfile
	if pod.Spec.SecurityContext != nil {
		p = pod.Spec.SecurityContext.SeccompProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		p = c.SecurityContext.SeccompProfile
	}
	switch {
	case p == nil && b.seccompDefault, p != nil && p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case p != nil && p.Type == corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, configError{errors.New("localhostProfile must be set if seccompProfile type is Localhost")}
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(b.seccompRoot, *p.LocalhostProfile)}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// sandboxConfig is the kubelet's sandbox config of pod at attempt.
func (b *builder) sandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Hostname:     podHostname(pod, b.clusterDomain),
		LogDirectory: podsync.PodLogDir(b.podLogRoot, pod),
		DnsConfig:    dnsConfig(pod, b.clusterDNS, b.clusterDomain, b.resolvConf),
		Labels:       sandboxLabels(pod),
		Annotations:  make(map[string]string, len(pod.Annotations)),
	}
	for k, v := range pod.Annotations {
		cfg.Annotations[k] = v
	}
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case corev1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case corev1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	// As the kubelet: the sandbox runs with the runtime's default seccomp
	// profile whatever the pod's, so pod profiles stricter than the pause
	// container needs work.
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod),
		Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}
	sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups = podIdentity(pod)
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.SelinuxOptions = seLinuxOption(psc.SELinuxOptions)
		sc.SupplementalGroupsPolicy = supplementalGroupsPolicy(psc)
	}
	for i := range pod.Spec.Containers {
		if s := pod.Spec.Containers[i].SecurityContext; s != nil && s.Privileged != nil && *s.Privileged {
			sc.Privileged = true
		}
	}
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent:    PodCgroupParent(pod, b.cgroupDriver, b.cgroupRoot),
		SecurityContext: sc,
	}
	if psc := pod.Spec.SecurityContext; psc != nil && len(psc.Sysctls) > 0 {
		cfg.Linux.Sysctls = make(map[string]string, len(psc.Sysctls))
		for _, s := range psc.Sysctls {
			cfg.Linux.Sysctls[s.Name] = s.Value
		}
	}
	return cfg
}

// podIdentity is the pod security context's user, group and supplemental
// groups (with fsGroup), for the sandbox and as defaults for containers.
func podIdentity(pod *corev1.Pod) (user, group *runtimeapi.Int64Value, groups []int64) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return nil, nil, nil
	}
	if psc.RunAsUser != nil {
		user = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		group = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	groups = slices.Clone(psc.SupplementalGroups)
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	return user, group, groups
}

// podIPs is what the status and the downward API see of a pod's addresses.
type podIPs struct{ pod, host []string }

// containerConfig is the kubelet's container config of c at restartCount.
func (b *builder) containerConfig(pod *corev1.Pod, c *corev1.Container, restartCount int, ips podIPs) (*runtimeapi.ContainerConfig, error) {
	if err := admission.UnsupportedField(pod, c); err != nil {
		return nil, configError{err}
	}
	security, err := b.containerSecurity(pod, c)
	if err != nil {
		return nil, err
	}
	env, err := b.envVars(pod, c, ips)
	if err != nil {
		return nil, err
	}
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		vars[kv.Key] = string(kv.Value)
	}
	mounts, err := b.mounts(pod, c, restartCount, ips, vars)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: c.Image},
		Command:     expandAll(c.Command, vars),
		Args:        expandAll(c.Args, vars),
		WorkingDir:  c.WorkingDir,
		Envs:        env,
		Mounts:      mounts,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, restartCount),
		LogPath:     podsync.ContainerLogPath(c.Name, restartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(pod, c, b.memoryCapacity),
			SecurityContext: security,
		},
	}
	return cfg, nil
}

// containerSecurity is c's security context as the kubelet makes it: the
// pod's identity, seccomp, AppArmor and SELinux options with the
// container's over them, capabilities as written (the runtime adds the
// CAP_ prefix and knows ALL), no_new_privs from allowPrivilegeEscalation
// false, and the kubelet's masked and read-only /proc paths unless
// privileged or procMount Unmasked.
func (b *builder) containerSecurity(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.LinuxContainerSecurityContext, error) {
	seccomp, err := b.seccomp(pod, c)
	if err != nil {
		return nil, err
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod), Seccomp: seccomp}
	sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups = podIdentity(pod)
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.SelinuxOptions = seLinuxOption(psc.SELinuxOptions)
		sc.SupplementalGroupsPolicy = supplementalGroupsPolicy(psc)
	}
	if p := admission.AppArmorProfile(pod, c); p != nil {
		if p.Type != corev1.AppArmorProfileTypeUnconfined && !b.appArmor {
			// Refused here too for pods admitted without admission.AppArmor:
			// a runtime drops the profile on such a host.
			return nil, configError{errors.New("Cannot enforce AppArmor: AppArmor is not enabled on the host")}
		}
		switch p.Type {
		case corev1.AppArmorProfileTypeRuntimeDefault:
			sc.Apparmor, sc.ApparmorProfile = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, corev1.DeprecatedAppArmorBetaProfileRuntimeDefault
		case corev1.AppArmorProfileTypeUnconfined:
			sc.Apparmor, sc.ApparmorProfile = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, corev1.DeprecatedAppArmorBetaProfileNameUnconfined
		case corev1.AppArmorProfileTypeLocalhost:
			if p.LocalhostProfile == nil {
				return nil, configError{errors.New("missing localhost apparmor profile name")}
			}
			sc.Apparmor = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile}
			sc.ApparmorProfile = corev1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile
		default:
			return nil, configError{fmt.Errorf("unknown apparmor profile type: %q", p.Type)}
		}
	}
	var procMount *corev1.ProcMountType
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
		}
		if csc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
		}
		if csc.SELinuxOptions != nil {
			sc.SelinuxOptions = seLinuxOption(csc.SELinuxOptions)
		}
		sc.Privileged = csc.Privileged != nil && *csc.Privileged
		sc.ReadonlyRootfs = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
		if csc.AllowPrivilegeEscalation != nil {
			sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
		}
		if caps := csc.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{AddCapabilities: make([]string, len(caps.Add)), DropCapabilities: make([]string, len(caps.Drop))}
			for i, a := range caps.Add {
				sc.Capabilities.AddCapabilities[i] = string(a)
			}
			for i, d := range caps.Drop {
				sc.Capabilities.DropCapabilities[i] = string(d)
			}
		}
		procMount = csc.ProcMount
	}
	if !sc.Privileged && (procMount == nil || *procMount != corev1.UnmaskedProcMount) {
		// As the kubelet: mask and make read-only the default /proc paths.
		sc.MaskedPaths = defaultMaskedPaths()
		sc.ReadonlyPaths = defaultReadonlyPaths
	}
	return sc, nil
}

func seLinuxOption(o *corev1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// supplementalGroupsPolicy is the pod's policy in CRI's terms (Merge when
// unset or unknown).
func supplementalGroupsPolicy(psc *corev1.PodSecurityContext) runtimeapi.SupplementalGroupsPolicy {
	if psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == corev1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

var (
	// defaultMaskedPaths are the kubelet's: a fixed list and the thermal
	// throttle directories of the host's CPUs.
	defaultMaskedPaths = sync.OnceValue(func() []string {
		paths := []string{"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
		dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle")
		cpu := func(d string) int {
			n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(d)), "cpu"))
			return n
		}
		slices.SortFunc(dirs, func(a, b string) int { return cpu(a) - cpu(b) })
		return append(paths, dirs...)
	})
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// envVars resolves the container's env as the kubelet does: envFrom
// sources first (a later one overriding an earlier one), then env in order
// (literal values with $(VAR) expanded against the variables before them
// and the service variables, downward-API field references the node can
// answer, and, through PodData, ConfigMap and Secret keys and container
// resources), then the service variables the container does not set.
// Without PodData, envFrom and references to the API or to resources are
// an ErrConfig.
func (b *builder) envVars(pod *corev1.Pod, c *corev1.Container, ips podIPs) ([]*runtimeapi.KeyValue, error) {
	// PodData reads from its caches; nothing it does here waits.
	ctx := context.Background()
	var from, services []corev1.EnvVar
	switch {
	case b.data != nil:
		var err error
		if from, services, err = b.data.EnvFrom(ctx, pod, c); err != nil {
			return nil, configError{err}
		}
	case len(c.EnvFrom) > 0:
		return nil, fmt.Errorf("%w: envFrom needs Options.PodData", ErrConfig)
	}
	vars := make(map[string]string, len(from)+len(c.Env)) // the container's own variables
	all := make(map[string]string, len(services)+len(from)+len(c.Env))
	for _, e := range services {
		all[e.Name] = e.Value
	}
	order := make([]string, 0, len(from)+len(c.Env))
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k], all[k] = v, v
	}
	for _, e := range from {
		set(e.Name, e.Value)
	}
	for _, e := range c.Env {
		v := e.Value
		switch vf := e.ValueFrom; {
		case vf == nil:
			v = expand(v, all)
		case vf.FieldRef != nil:
			var err error
			if v, err = b.fieldRef(pod, vf.FieldRef.FieldPath, ips); err != nil {
				return nil, err
			}
		case b.data != nil:
			val, ok, err := b.data.EnvValue(ctx, pod, c, vf)
			if err != nil {
				return nil, configError{err}
			}
			if !ok {
				continue
			}
			v = val
		default:
			return nil, fmt.Errorf("%w: env %s: only values and fieldRef are supported without Options.PodData", ErrConfig, e.Name)
		}
		set(e.Name, v)
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order)+len(services))
	for _, k := range order {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(vars[k])})
	}
	for _, e := range services {
		if _, own := vars[e.Name]; !own {
			out = append(out, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
		}
	}
	return out, nil
}

func (b *builder) fieldRef(pod *corev1.Pod, path string, ips podIPs) (string, error) {
	first := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[0]
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return b.nodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(ips.host), nil
	case "status.hostIPs":
		return strings.Join(ips.host, ","), nil
	case "status.podIP":
		return first(ips.pod), nil
	case "status.podIPs":
		return strings.Join(ips.pod, ","), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("%w: unsupported fieldRef %q", ErrConfig, path)
}

func expandAll(in []string, vars map[string]string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vars)
	}
	return out
}

// expand applies Kubernetes' $(VAR) syntax: $(NAME) with a known NAME
// becomes its value, $$ a literal $, anything else stays as written.
func expand(s string, vars map[string]string) string {
	return expandWith(s, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}

// expandWith is expand with the variables looked up by lookup.
func expandWith(s string, lookup func(name string) (string, bool)) string {
	i := strings.IndexByte(s, '$')
	if i < 0 {
		return s
	}
	var sb strings.Builder
	sb.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		if s[0] != '$' || len(s) == 1 {
			j := strings.IndexByte(s[1:], '$')
			if j < 0 {
				sb.WriteString(s)
				break
			}
			sb.WriteString(s[:j+1])
			s = s[j+1:]
			continue
		}
		switch {
		case s[1] == '$':
			sb.WriteByte('$')
			s = s[2:]
		case s[1] == '(' && strings.IndexByte(s, ')') > 0:
			end := strings.IndexByte(s, ')')
			if v, ok := lookup(s[2:end]); ok {
				sb.WriteString(v)
			} else {
				sb.WriteString(s[:end+1])
			}
			s = s[end+1:]
		default:
			sb.WriteByte('$')
			s = s[1:]
		}
	}
	return sb.String()
}

// podDir is where the pod's volumes and termination-message files live.
func (b *builder) podDir(pod *corev1.Pod) string { return filepath.Join(b.podRoot, string(pod.UID)) }

// mounts prepares and returns the container's mounts: volumes PodData
// serves (read-only for Secret, ConfigMap, downward-API and projected
// volumes, as the kubelet mounts them), emptyDir directories under the
// pod's directory, hostPath volumes after the kubelet's type checks, subPaths
// that stay inside their volume, the pod's /etc/hosts and the
// termination-message file.
func (b *builder) mounts(pod *corev1.Pod, c *corev1.Container, restartCount int, ips podIPs, vars map[string]string) ([]*runtimeapi.Mount, error) {
	vols := make(map[string]*corev1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []*runtimeapi.Mount
	hosts := len(ips.pod) > 0 || pod.Spec.HostNetwork
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		hosts = hosts && vm.MountPath != etcHostsPath
		v := vols[vm.Name]
		if v == nil {
			return nil, fmt.Errorf("%w: volume %q not found", ErrConfig, vm.Name)
		}
		var host string
		served := false
		if b.data != nil {
			host, served = b.data.VolumePath(pod, b.podDir(pod), v)
		}
		switch {
		case served:
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			return nil, fmt.Errorf("%w: volume %q: emptyDir medium Memory needs Options.PodData", ErrConfig, vm.Name)
		case v.EmptyDir != nil:
			host = filepath.Join(b.podDir(pod), "volumes", "kubernetes.io~empty-dir", v.Name)
			if err := makeEmptyDir(host, pod); err != nil {
				return nil, err
			}
		case v.HostPath != nil:
			host = v.HostPath.Path
			if err := checkHostPath(host, v.HostPath.Type); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: volume %q: only emptyDir and hostPath are supported without Options.PodData", ErrConfig, vm.Name)
		}
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			var err error
			if host, err = b.mountSubPath(pod, c, i, vm, host, vars); err != nil {
				return nil, err
			}
		}
		readOnly := vm.ReadOnly || v.Secret != nil || v.ConfigMap != nil || v.DownwardAPI != nil || v.Projected != nil
		m := &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: readOnly}
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case corev1.MountPropagationHostToContainer:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case corev1.MountPropagationBidirectional:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		out = append(out, m)
	}
	if hosts {
		f, err := b.writeHostsFile(pod, ips)
		if err != nil {
			return nil, err
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: f})
	}
	if c.TerminationMessagePath != "" {
		f := b.terminationMessageFile(pod.UID, c.Name, restartCount)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			return nil, err
		}
		// As the kubelet: writable by whichever user the container runs
		// as, whatever the umask.
		if err := os.Chmod(f, 0o666); err != nil {
			return nil, err
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: f})
	}
	return out, nil
}

// subPath resolves sub (relative, without "..") below a volume's host
// directory: after symlinks it must stay inside the volume (a container
// cannot point a subPath at the host with a symlink it made). Missing
// directories are made with the volume's mode, as the kubelet makes them,
// from a descriptor of the deepest existing one opened without following
// symlinks, so they cannot be made anywhere else.
func subPath(volume, sub string) (string, error) {
	if err := checkSubPath(sub); err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(volume)
	if err != nil {
		return "", err
	}
	rootInfo, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	inside := func(p string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	outside := fmt.Errorf("subPath `%s` resolves outside its volume", sub)
	// Walk down one element at a time, resolving each symlink, until the
	// first one missing.
	cur := root
	elems := strings.Split(filepath.Clean(sub), "/")
	for i, e := range elems {
		next := filepath.Join(cur, e)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := makeDirs(root, cur, elems[i:], rootInfo.Mode()); err != nil {
				return "", fmt.Errorf("creating subPath `%s`: %w", sub, err)
			}
			return filepath.Join(append([]string{cur}, elems[i:]...)...), nil
		case err != nil:
			return "", err
		case fi.Mode()&os.ModeSymlink != 0:
			if next, err = filepath.EvalSymlinks(next); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					// A dangling symlink: where it points is not checked.
					return "", outside
				}
				return "", err
			}
		}
		if !inside(next) {
			return "", outside
		}
		cur = next
	}
	return cur, nil
}

// makeDirs makes the directories names, one inside the other, in parent
// (root or below it, symlink-free), each from the descriptor of the one
// before, with the permission bits of mode (setgid and sticky too) whatever
// the umask.
func makeDirs(root, parent string, names []string, mode os.FileMode) error {
	fd, err := openBeneath(root, parent)
	if err != nil {
		return err
	}
	perm := uint32(mode.Perm())
	if mode&os.ModeSetgid != 0 {
		perm |= unix.S_ISGID
	}
	if mode&os.ModeSticky != 0 {
		perm |= unix.S_ISVTX
	}
	for _, name := range names {
		if err := unix.Mkdirat(fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return fmt.Errorf("mkdir %s: %w", name, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("opening %s: %w", name, err)
		}
		fd = next
		if err := unix.Fchmod(fd, perm); err != nil {
			unix.Close(fd)
			return err
		}
	}
	unix.Close(fd)
	return nil
}

// etcHostsPath is where a container sees the pod's hosts file.
const etcHostsPath = "/etc/hosts"

// nodeHostsFile is the node's hosts file, the base of host-network pods'.
var nodeHostsFile = "/etc/hosts"

// writeHostsFile writes the pod's hosts file, <pod dir>/etc-hosts, as the
// kubelet does: for a pod-network pod the managed entries (localhost, the
// IPv6 names, each pod IP with the pod's hostname and FQDN); for a
// host-network pod the node's own hosts file; then the pod's hostAliases.
func (b *builder) writeHostsFile(pod *corev1.Pod, ips podIPs) (string, error) {
	var buf strings.Builder
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(nodeHostsFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		buf.WriteString("# Kubernetes-managed hosts file (host network).\n")
		buf.Write(node)
	} else {
		buf.WriteString("# Kubernetes-managed hosts file.\n")
		buf.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		host := pod.Name
		if pod.Spec.Hostname != "" {
			host = pod.Spec.Hostname
		}
		host = truncateHostname(host, 63)
		domain := ""
		if pod.Spec.Subdomain != "" && b.clusterDomain != "" {
			domain = pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + b.clusterDomain
		}
		for _, ip := range ips.pod {
			if domain != "" {
				fmt.Fprintf(&buf, "%s\t%s.%s\t%s\n", ip, host, domain, host)
			} else {
				fmt.Fprintf(&buf, "%s\t%s\n", ip, host)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		buf.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&buf, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	f := filepath.Join(b.podDir(pod), "etc-hosts")
	if err := os.MkdirAll(filepath.Dir(f), 0o750); err != nil {
		return "", err
	}
	if err := os.WriteFile(f, []byte(buf.String()), 0o644); err != nil {
		return "", err
	}
	return f, os.Chmod(f, 0o644)
}

// terminationMessageFile is the host file mounted at a container's
// terminationMessagePath: <PodRoot>/<uid>/containers/<name>/<restartCount>.
func (b *builder) terminationMessageFile(uid types.UID, name string, restartCount int) string {
	return filepath.Join(b.podRoot, string(uid), "containers", name, strconv.Itoa(restartCount))
}

// checkHostPath applies the kubelet's hostPath type checks, creating what
// DirectoryOrCreate and FileOrCreate ask for.
func checkHostPath(p string, t *corev1.HostPathType) error {
	if t == nil || *t == corev1.HostPathUnset {
		return nil
	}
	fi, err := os.Stat(p)
	switch *t {
	case corev1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(p, 0o755)
		}
		if err == nil && !fi.IsDir() {
			return fmt.Errorf("%w: hostPath %s is not a directory", ErrConfig, p)
		}
		return err
	case corev1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p, nil, 0o644)
		}
		if err == nil && fi.IsDir() {
			return fmt.Errorf("%w: hostPath %s is a directory", ErrConfig, p)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: hostPath type check failed: %s is not a %s", ErrConfig, p, *t)
	}
	mode := fi.Mode()
	ok := false
	switch *t {
	case corev1.HostPathDirectory:
		ok = mode.IsDir()
	case corev1.HostPathFile:
		ok = mode.IsRegular()
	case corev1.HostPathSocket:
		ok = mode&os.ModeSocket != 0
	case corev1.HostPathCharDev:
		ok = mode&os.ModeCharDevice != 0
	case corev1.HostPathBlockDev:
		ok = mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0
	}
	if !ok {
		return fmt.Errorf("%w: hostPath type check failed: %s is not a %s", ErrConfig, p, *t)
	}
	return nil
}

// makeEmptyDir makes an emptyDir volume's directory once, as the kubelet
// does: mode 0777 whatever the umask, and with the pod's fsGroup that group
// and the set-group-ID bit, so files the containers make there get it too.
// An existing directory is left as the containers made it.
func makeEmptyDir(dir string, pod *corev1.Pod) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	mode := os.FileMode(0o777)
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil && *sc.FSGroup >= 0 {
		if err := os.Lchown(dir, -1, int(*sc.FSGroup)); err != nil {
			return fmt.Errorf("emptyDir %s: fsGroup %d: %w", dir, *sc.FSGroup, err)
		}
		mode |= os.ModeSetgid
	}
	return os.Chmod(dir, mode)
}
