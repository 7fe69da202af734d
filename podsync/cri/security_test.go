package cri

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestContainerSecurityConfig: what the kubelet passes to CRI from the
// security contexts, field by field.
func TestContainerSecurityConfig(t *testing.T) {
	b := &builder{podLogRoot: "/var/log/pods", podRoot: t.TempDir(), seccompRoot: "/var/lib/nodekit/seccomp", cgroupDriver: CgroupfsDriver, appArmor: true}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		SELinuxOptions:           &corev1.SELinuxOptions{User: "system_u", Role: "system_r", Type: "spc_t", Level: "s0:c1,c2"},
		SupplementalGroupsPolicy: new(corev1.SupplementalGroupsPolicyStrict),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new("profiles/audit.json")},
		AppArmorProfile:          &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
	}
	c := &pod.Spec.Containers[0]
	c.SecurityContext = &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "CAP_SYS_TIME"}, Drop: []corev1.Capability{"ALL"}},
		AllowPrivilegeEscalation: new(false),
		SELinuxOptions:           &corev1.SELinuxOptions{Type: "container_t"},
	}
	cfg, err := b.containerConfig(pod, c, 0, podIPs{})
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.Linux.SecurityContext
	if caps := sc.Capabilities; !slices.Equal(caps.AddCapabilities, []string{"NET_ADMIN", "CAP_SYS_TIME"}) || !slices.Equal(caps.DropCapabilities, []string{"ALL"}) {
		t.Errorf("capabilities passed as written: %v", caps)
	}
	if !sc.NoNewPrivs || sc.SelinuxOptions.GetType() != "container_t" || sc.SelinuxOptions.GetUser() != "" {
		t.Errorf("no_new_privs %v, SELinux %v (the container's options replace the pod's)", sc.NoNewPrivs, sc.SelinuxOptions)
	}
	if sc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
		t.Errorf("supplemental groups policy %v", sc.SupplementalGroupsPolicy)
	}
	if sc.Seccomp.ProfileType != runtimeapi.SecurityProfile_Localhost || sc.Seccomp.LocalhostRef != "/var/lib/nodekit/seccomp/profiles/audit.json" {
		t.Errorf("seccomp %v", sc.Seccomp)
	}
	if sc.Apparmor.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault || sc.ApparmorProfile != "runtime/default" {
		t.Errorf("AppArmor %v %q", sc.Apparmor, sc.ApparmorProfile)
	}
	if !slices.Contains(sc.MaskedPaths, "/proc/kcore") || !slices.Contains(sc.MaskedPaths, "/proc/interrupts") || !slices.Contains(sc.ReadonlyPaths, "/proc/sys") {
		t.Errorf("masked %v read-only %v", sc.MaskedPaths, sc.ReadonlyPaths)
	}
	sb := b.sandboxConfig(pod, 0).Linux.SecurityContext
	if sb.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault || sb.SelinuxOptions.GetType() != "spc_t" || sb.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
		t.Errorf("sandbox: seccomp %v SELinux %v policy %v", sb.Seccomp, sb.SelinuxOptions, sb.SupplementalGroupsPolicy)
	}

	// procMount Unmasked: nothing masked or read-only.
	c.SecurityContext.ProcMount = new(corev1.UnmaskedProcMount)
	if cfg, err = b.containerConfig(pod, c, 0, podIPs{}); err != nil || len(cfg.Linux.SecurityContext.MaskedPaths)+len(cfg.Linux.SecurityContext.ReadonlyPaths) != 0 {
		t.Errorf("Unmasked: %v %v", cfg.GetLinux().GetSecurityContext(), err)
	}
	// The older AppArmor annotation, a Localhost profile.
	pod.Annotations = map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "localhost/k8s-nginx"}
	if cfg, err = b.containerConfig(pod, c, 0, podIPs{}); err != nil ||
		cfg.Linux.SecurityContext.Apparmor.GetLocalhostRef() != "k8s-nginx" || cfg.Linux.SecurityContext.ApparmorProfile != "localhost/k8s-nginx" {
		t.Errorf("AppArmor annotation: %v %v", cfg.GetLinux().GetSecurityContext().GetApparmor(), err)
	}
	// On a host without AppArmor, a profile is refused.
	b.appArmor = false
	if _, err := b.containerConfig(pod, c, 0, podIPs{}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "AppArmor is not enabled on the host") {
		t.Errorf("AppArmor without the host's: %v", err)
	}
	b.appArmor = true
	// A Localhost seccomp profile without a name.
	c.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}
	if _, err := b.containerConfig(pod, c, 0, podIPs{}); !errors.Is(err, ErrConfig) {
		t.Errorf("Localhost without a profile: %v", err)
	}
}

// TestUnsupportedFieldIsConfigError: a field nodekit refuses fails the
// container with the refusal's message, even without admission.
func TestUnsupportedFieldIsConfigError(t *testing.T) {
	b := &builder{podLogRoot: "/var/log/pods", podRoot: t.TempDir(), cgroupDriver: CgroupfsDriver}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	_, err := b.containerConfig(pod, &pod.Spec.Containers[0], 0, podIPs{})
	if !errors.Is(err, ErrConfig) || !errors.Is(err, admission.ErrUnsupported) || !strings.HasPrefix(err.Error(), "spec.containers[0].resources.claims is not supported") {
		t.Errorf("resource claims: %v", err)
	}
}

// TestTerminationMessageFileWritable: the file is 0666 whatever the umask,
// so a container running as any user can write its message.
func TestTerminationMessageFileWritable(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	b := &builder{podLogRoot: "/var/log/pods", podRoot: t.TempDir(), cgroupDriver: CgroupfsDriver}
	pod := testPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	if _, err := b.containerConfig(pod, &pod.Spec.Containers[0], 0, podIPs{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(b.podRoot, string(pod.UID), "containers", "app", "0"))
	if err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("termination message file: %v %v", fi.Mode(), err)
	}
}

// imageUsers is a fake runtime whose images run as the users given.
type imageUsers struct {
	*runtimetest.Runtime
	images map[string]*runtimeapi.Image
}

func (r imageUsers) ImageStatus(_ context.Context, image *runtimeapi.ImageSpec, _ bool) (*runtimeapi.ImageStatusResponse, error) {
	return &runtimeapi.ImageStatusResponse{Image: r.images[image.GetImage()]}, nil
}

// TestVerifyRunAsNonRoot: the kubelet's three verdicts, with its messages.
func TestVerifyRunAsNonRoot(t *testing.T) {
	rt := imageUsers{Runtime: runtimetest.New(runtimetest.Options{}), images: map[string]*runtimeapi.Image{
		"uid1000": {Uid: &runtimeapi.Int64Value{Value: 1000}},
		"uid0":    {Uid: &runtimeapi.Int64Value{Value: 0}},
		"named":   {Username: "nobody"},
		"nouser":  {},
	}}
	s, err := New(Options{Runtime: rt, ResolvConf: "-", PodRoot: t.TempDir(), PodLogRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const pod = `(pod: "web_default(uid-1)", container: app)`
	for _, tc := range []struct {
		image                  string
		podUser                *int64
		ctrUser                *int64
		podNonRoot, ctrNonRoot *bool
		want                   string
	}{
		{image: "nouser", want: ""},
		{image: "nouser", podNonRoot: new(true), ctrNonRoot: new(false), want: ""},
		{image: "uid1000", podNonRoot: new(true), want: ""},
		{image: "uid0", podNonRoot: new(true), podUser: new(int64(1000)), want: ""},
		{image: "uid1000", ctrNonRoot: new(true), ctrUser: new(int64(0)), want: "container's runAsUser breaks non-root policy " + pod},
		{image: "uid1000", podNonRoot: new(true), podUser: new(int64(0)), want: "container's runAsUser breaks non-root policy " + pod},
		{image: "uid0", ctrNonRoot: new(true), want: "container has runAsNonRoot and image will run as root " + pod},
		{image: "nouser", ctrNonRoot: new(true), want: "container has runAsNonRoot and image will run as root " + pod},
		{image: "missing", ctrNonRoot: new(true), want: "container has runAsNonRoot and image will run as root " + pod},
		{image: "named", ctrNonRoot: new(true), want: "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root " + pod},
	} {
		p := testPod(corev1.RestartPolicyAlways, "app")
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tc.podUser, RunAsNonRoot: tc.podNonRoot}
		c := &p.Spec.Containers[0]
		c.Image = tc.image
		c.SecurityContext = &corev1.SecurityContext{RunAsUser: tc.ctrUser, RunAsNonRoot: tc.ctrNonRoot}
		err := s.verifyRunAsNonRoot(context.Background(), p, c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, ErrConfig)):
			t.Errorf("%+v: %v, want %s", tc, err, tc.want)
		}
	}
}
