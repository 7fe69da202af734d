package cri

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
)

// reportStatus is a command that writes the lines of /proc/self/status
// the tests read, and the output of id, as the termination message.
const reportStatus = "{ grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; id; } > /dev/termination-log"

// terminatedMessages runs pod (restartPolicy Never) to its end and returns
// each container's termination message by name.
func (e *e2e) terminatedMessages(pod *corev1.Pod) map[string]string {
	e.t.Helper()
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "terminal", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodSucceeded || s.Phase == corev1.PodFailed
	})
	out := map[string]string{}
	for _, cs := range s.ContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			e.t.Errorf("container %s: %+v", cs.Name, cs.State)
			continue
		}
		out[cs.Name] = cs.State.Terminated.Message
	}
	e.waitEmpty()
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	return out
}

// statusField is the value of a "Name:\tvalue" line of the report.
func statusField(report, name string) string {
	for _, line := range strings.Split(report, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "(missing)"
}

// hasCap reports whether the CapEff mask in report has capability bit.
func hasCap(t *testing.T, report string, bit uint) bool {
	t.Helper()
	mask, err := strconv.ParseUint(statusField(report, "CapEff"), 16, 64)
	if err != nil {
		t.Fatalf("CapEff in %q: %v", report, err)
	}
	return mask&(1<<bit) != 0
}

const (
	capNetAdmin = 12
	capSysTime  = 25
)

func TestE2ECapabilities(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2ECapabilities) }

// testE2ECapabilities: drop ALL leaves no effective capability, add gives
// NET_ADMIN and SYS_TIME, drop ALL with add NET_ADMIN leaves that alone,
// allowPrivilegeEscalation false sets no_new_privs, and the default has
// neither capability nor no_new_privs.
func testE2ECapabilities(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	pod := e2ePod(c, "caps", corev1.RestartPolicyNever, "sh", "-c", reportStatus)
	base := pod.Spec.Containers[0]
	withSC := func(name string, sc *corev1.SecurityContext) corev1.Container {
		ct := base
		ct.Name, ct.SecurityContext = name, sc
		return ct
	}
	pod.Spec.Containers = []corev1.Container{
		withSC("default", nil),
		withSC("dropall", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}),
		withSC("add", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "SYS_TIME"}}}),
		withSC("addonly", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}}}),
		withSC("nonewprivs", &corev1.SecurityContext{AllowPrivilegeEscalation: new(false)}),
	}
	got := e.terminatedMessages(pod)
	if r := got["default"]; hasCap(t, r, capNetAdmin) || hasCap(t, r, capSysTime) || statusField(r, "NoNewPrivs") != "0" {
		t.Errorf("default: %q", r)
	}
	if r := got["dropall"]; statusField(r, "CapEff") != "0000000000000000" {
		t.Errorf("drop ALL: %q", r)
	}
	if r := got["add"]; !hasCap(t, r, capNetAdmin) || !hasCap(t, r, capSysTime) {
		t.Errorf("add NET_ADMIN, SYS_TIME: %q", r)
	}
	if r := got["addonly"]; statusField(r, "CapEff") != "0000000000001000" {
		t.Errorf("drop ALL, add NET_ADMIN: %q", r)
	}
	if r := got["nonewprivs"]; statusField(r, "NoNewPrivs") != "1" {
		t.Errorf("allowPrivilegeEscalation false: %q", r)
	}
}

func TestE2ENonRootTerminationMessage(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2ENonRootTerminationMessage)
}

// testE2ENonRootTerminationMessage: a container running as uid 1000 (and
// runAsNonRoot) writes its termination message.
func testE2ENonRootTerminationMessage(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	pod := e2ePod(c, "nonroot-message", corev1.RestartPolicyNever, "sh", "-c", "id -u > /dev/termination-log")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: new(int64(1000)), RunAsGroup: new(int64(3000)), RunAsNonRoot: new(true)}
	if got := e.terminatedMessages(pod)["app"]; got != "1000\n" {
		t.Errorf("termination message %q, want 1000", got)
	}
}

func TestE2ESeccompLocalhost(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2ESeccompLocalhost)
}

// testE2ESeccompLocalhost: a Localhost profile is read below the seccomp
// profile root (the container runs filtered); one that does not exist is
// CreateContainerError with the runtime's reason in the container status.
func testE2ESeccompLocalhost(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	root := e.cri.b.seccompRoot
	if err := os.MkdirAll(filepath.Join(root, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := os.WriteFile(filepath.Join(root, "profiles", "allow.json"), []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := e2ePod(c, "seccomp-ok", corev1.RestartPolicyNever, "sh", "-c", reportStatus)
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
		Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new("profiles/allow.json")}}
	if r := e.terminatedMessages(pod)["app"]; statusField(r, "Seccomp") != "2" {
		t.Errorf("Localhost profile: %q, want Seccomp 2 (filtered)", r)
	}

	missing := e2ePod(c, "seccomp-missing", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	missing.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
		Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new("profiles/missing.json")}}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{missing}})
	s := e.waitStatus(missing, "CreateContainerError", func(s corev1.PodStatus) bool {
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Waiting != nil &&
			s.ContainerStatuses[0].State.Waiting.Reason == podsync.ReasonCreateContainerError
	})
	if msg := s.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "seccomp") || !strings.Contains(msg, "missing.json") {
		t.Errorf("waiting message %q, want the runtime's reason", msg)
	}
	e.remove(missing)
}

func TestE2ERunAsNonRoot(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2ERunAsNonRoot) }

// testE2ERunAsNonRoot: runAsNonRoot is checked against runAsUser, else the
// image's user, with the kubelet's messages as CreateContainerConfigError;
// an image whose user is numeric and not root runs as that user.
func testE2ERunAsNonRoot(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	ctx := context.Background()
	const uidImage, namedImage = "localhost/nodekit/busybox-uid:1000", "localhost/nodekit/busybox-named:nobody"
	if err := c.ImportBusyboxAs(ctx, uidImage, "1000"); err != nil {
		t.Fatal(err)
	}
	if err := c.ImportBusyboxAs(ctx, namedImage, "nobody"); err != nil {
		t.Fatal(err)
	}
	nonRoot := func(name, image string, user *int64) *corev1.Pod {
		pod := e2ePod(c, name, corev1.RestartPolicyNever, "sh", "-c", reportStatus)
		pod.Spec.Containers[0].Image = image
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: new(true), RunAsUser: user}
		return pod
	}
	if r := e.terminatedMessages(nonRoot("nonroot-uid", uidImage, nil))["app"]; !strings.Contains(r, "uid=1000") {
		t.Errorf("image user 1000: %q", r)
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{nonRoot("nonroot-root-image", c.BusyboxImage, nil), `container has runAsNonRoot and image will run as root (pod: "nonroot-root-image_default(uid-nonroot-root-image)", container: app)`},
		{nonRoot("nonroot-user0", uidImage, new(int64(0))), `container's runAsUser breaks non-root policy (pod: "nonroot-user0_default(uid-nonroot-user0)", container: app)`},
		{nonRoot("nonroot-named", namedImage, nil), `container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: "nonroot-named_default(uid-nonroot-named)", container: app)`},
	} {
		e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{tc.pod}})
		s := e.waitStatus(tc.pod, "CreateContainerConfigError", func(s corev1.PodStatus) bool {
			return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Waiting != nil &&
				s.ContainerStatuses[0].State.Waiting.Reason == podsync.ReasonCreateContainerConfigError
		})
		if msg := s.ContainerStatuses[0].State.Waiting.Message; msg != tc.want {
			t.Errorf("%s: %q, want %q", tc.pod.Name, msg, tc.want)
		}
		e.remove(tc.pod)
	}
}

func TestE2ESeccompRuntimeDefault(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2ESeccompRuntimeDefault)
}

// testE2ESeccompRuntimeDefault: a RuntimeDefault container runs filtered
// and cannot make a system call the runtime's profile blocks for a
// container without CAP_SYS_ADMIN (unshare: a new user namespace needs no
// capability, so only the filter stops it), which an Unconfined one beside
// it makes.
func testE2ESeccompRuntimeDefault(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	const try = "if unshare -U true 2>/dev/null; then r=allowed; else r=blocked; fi; " +
		"{ grep -E '^Seccomp:' /proc/self/status; echo unshare: $r; } > /dev/termination-log"
	pod := e2ePod(c, "seccomp-default", corev1.RestartPolicyNever, "sh", "-c", try)
	base := pod.Spec.Containers[0]
	withProfile := func(name string, typ corev1.SeccompProfileType) corev1.Container {
		ct := base
		ct.Name, ct.SecurityContext = name, &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: typ}}
		return ct
	}
	pod.Spec.Containers = []corev1.Container{
		withProfile("unconfined", corev1.SeccompProfileTypeUnconfined),
		withProfile("default", corev1.SeccompProfileTypeRuntimeDefault),
	}
	got := e.terminatedMessages(pod)
	if r := got["unconfined"]; statusField(r, "Seccomp") != "0" || statusField(r, "unshare") != "allowed" {
		t.Errorf("Unconfined: %q, want Seccomp 0 and unshare allowed", r)
	}
	if r := got["default"]; statusField(r, "Seccomp") != "2" || statusField(r, "unshare") != "blocked" {
		t.Errorf("RuntimeDefault: %q, want Seccomp 2 (filtered) and unshare blocked", r)
	}
}
