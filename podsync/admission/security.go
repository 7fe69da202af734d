package admission

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// Kubelet's reasons for the security admitters.
const (
	ReasonSysctlForbidden = "SysctlForbidden"
	ReasonAppArmor        = "AppArmor"
	// ReasonSupplementalGroupsPolicyNotSupported: supplementalGroupsPolicy
	// Strict on a node whose runtime does not report the feature.
	ReasonSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicyNotSupported"
)

// safeSysctls are kubelet's safe sysctls: namespaced and without effect on
// other pods; some only from the kernel release that namespaced them.
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
	{"net.ipv4.tcp_slow_start_after_idle", "4.15"},
	{"net.ipv4.tcp_notsent_lowat", "4.6"},
}

// SafeSysctls returns kubelet's safe sysctls on a kernel of release
// kernel ("6.1.0-13-amd64"): those namespaced on every kernel, and those
// namespaced since a release no newer than kernel. An empty or unparsable
// kernel gives only the former, as kubelet does when it cannot read the
// kernel's version.
func SafeSysctls(kernel string) []string {
	v, err := version.ParseGeneric(kernel)
	var out []string
	for _, s := range safeSysctls {
		if s.kernel == "" || err == nil && v.AtLeast(version.MustParseGeneric(s.kernel)) {
			out = append(out, s.name)
		}
	}
	return out
}

// SysctlOptions configure Sysctls.
type SysctlOptions struct {
	// AllowedUnsafeSysctls are allowed besides the safe ones (kubelet's
	// --allowed-unsafe-sysctls): names, or prefixes ending in "*"
	// ("kernel.msg*", "net.core.somaxconn"), each of a namespaced group
	// (net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, user.*,
	// kernel.domainname). Default none.
	AllowedUnsafeSysctls []string
	// KernelVersion is the node's kernel release, which decides the safe
	// sysctls (SafeSysctls). Default: /proc/sys/kernel/osrelease.
	KernelVersion string
}

// Sysctls is kubelet's sysctl admission: a pod whose
// spec.securityContext.sysctls names one that is neither safe nor allowed,
// or one of a namespace the pod shares with the host (net with
// hostNetwork, IPC with hostIPC, user without hostUsers: false), is
// rejected with ReasonSysctlForbidden and "forbidden sysctl: ...".
type Sysctls struct {
	names, prefixes map[string]utilsysctl.Namespace
}

var _ Admitter = (*Sysctls)(nil)

// sysctlPattern is the API's syntax of a sysctl name or pattern.
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

// NewSysctls checks o and returns the sysctl admitter.
func NewSysctls(o SysctlOptions) (*Sysctls, error) {
	if o.KernelVersion == "" {
		b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
		o.KernelVersion = strings.TrimSpace(string(b))
	}
	s := &Sysctls{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range append(SafeSysctls(o.KernelVersion), o.AllowedUnsafeSysctls...) {
		if len(p) > 253 || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("admission: allowed sysctl %q is not a sysctl name or a prefix ending in *", p)
		}
		ns, name, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("admission: allowed sysctl %q: the sysctls %q are not known to be namespaced", p, name)
		}
		if prefixed {
			s.prefixes[name] = ns
		} else {
			s.names[name] = ns
		}
	}
	return s, nil
}

// Admit rejects a pod with a sysctl that is not allowed.
func (s *Sysctls) Admit(pod *corev1.Pod, _ []*corev1.Pod) Result {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return Admitted
	}
	hostUsers := pod.Spec.HostUsers == nil || *pod.Spec.HostUsers
	for _, c := range sc.Sysctls {
		if err := s.check(c.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC, hostUsers); err != nil {
			return Result{Reason: ReasonSysctlForbidden, Message: "forbidden sysctl: " + err.Error()}
		}
	}
	return Admitted
}

func (s *Sysctls) check(name string, hostNet, hostIPC, hostUsers bool) error {
	name = utilsysctl.NormalizeName(name)
	ns, ok := s.names[name]
	if !ok {
		for p, pns := range s.prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	if !ok {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if ns == utilsysctl.IPCNamespace && hostIPC || ns == utilsysctl.NetNamespace && hostNet || ns == utilsysctl.UserNamespace && hostUsers {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}

// AppArmor is kubelet's AppArmor admission for a pending pod that asks
// for a profile other than Unconfined (spec.securityContext.appArmorProfile,
// a container's, or the container.apparmor.security.beta.kubernetes.io/
// annotations): rejected with ReasonAppArmor ("Cannot enforce AppArmor:
// AppArmor is not enabled on the host") when Enabled is false, or when a
// Localhost profile has no name. The zero value is a host without
// AppArmor; HostAppArmorEnabled tells the running host's.
type AppArmor struct {
	Enabled bool
}

var _ Admitter = AppArmor{}

// Admit rejects a pod whose AppArmor profile cannot be enforced.
func (a AppArmor) Admit(pod *corev1.Pod, _ []*corev1.Pod) Result {
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" || !AppArmorRequired(pod) {
		return Admitted
	}
	fail := func(err error) Result {
		return Result{Reason: ReasonAppArmor, Message: "Cannot enforce AppArmor: " + err.Error()}
	}
	if !a.Enabled {
		return fail(errors.New("AppArmor is not enabled on the host"))
	}
	for _, c := range allContainers(pod) {
		if p := AppArmorProfile(pod, c); p != nil && p.Type == corev1.AppArmorProfileTypeLocalhost &&
			(p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "") {
			return fail(fmt.Errorf("invalid empty AppArmor profile name: %q", p))
		}
	}
	return Admitted
}

func allContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		c := corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		out = append(out, &c)
	}
	return out
}

// HostAppArmorEnabled reports whether the running host enforces AppArmor,
// as kubelet checks it: /sys/kernel/security/apparmor exists and the
// module's "enabled" parameter is Y.
func HostAppArmorEnabled() bool {
	if _, err := os.Stat("/sys/kernel/security/apparmor"); err != nil {
		return false
	}
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && len(b) > 1 && b[0] == 'Y'
}

// AppArmorRequired reports whether pod asks for an AppArmor profile other
// than Unconfined, in a field or (the older form) an annotation.
func AppArmorRequired(pod *corev1.Pod) bool {
	confined := func(p *corev1.AppArmorProfile) bool {
		return p != nil && p.Type != corev1.AppArmorProfileTypeUnconfined
	}
	if sc := pod.Spec.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
		return true
	}
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
			return true
		}
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != corev1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}

// AppArmorProfile is container c's AppArmor profile as kubelet chooses it:
// the container's field, else its annotation
// (container.apparmor.security.beta.kubernetes.io/<name>: runtime/default,
// unconfined or localhost/<profile>), else the pod's field; nil when none.
func AppArmorProfile(pod *corev1.Pod, c *corev1.Container) *corev1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		case v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
			return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil {
		return sc.AppArmorProfile
	}
	return nil
}
