package sidebyside

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scenario is one pod of the status differential: how it is built, when
// its status has settled, and how long that may take.
type scenario struct {
	name string
	// mod changes the base pod (diffPod): one container "app" running
	// command under restartPolicy Always, on the pod network.
	mod     func(p *corev1.Pod)
	command string
	// done says the pod has reached the state to record; the status is
	// recorded once done has held, with the normalised status unchanged,
	// for steady (default 3s).
	done   func(p *corev1.Pod) bool
	steady time.Duration
	// deadline bounds the wait from creation (default 2m): the status is
	// then recorded as it is, marked unsettled.
	deadline time.Duration
	// deleteWhen, if set: the pod is deleted with grace deleteGrace once
	// it holds, and recorded when it is gone (its last status seen).
	deleteWhen  func(p *corev1.Pod) bool
	deleteGrace int64
}

// diffRuntimeClass is the RuntimeClass TestPodStatusDiff creates, with a
// handler no runtime here has.
const diffRuntimeClass = "nodekit-diff-no-handler"

// Container commands.
const (
	sleeper    = "trap 'exit 0' TERM; sleep 3600 & wait"
	terminalTo = 3 * time.Second // steady period for finished pods
)

func policy(r corev1.RestartPolicy) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.RestartPolicy = r }
}

func both(mods ...func(*corev1.Pod)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, m := range mods {
			m(p)
		}
	}
}

func app(f func(c *corev1.Container)) func(*corev1.Pod) {
	return func(p *corev1.Pod) { f(&p.Spec.Containers[0]) }
}

func initC(name, command string) corev1.Container {
	return corev1.Container{Name: name, Command: []string{"sh", "-c", command}}
}

func withInit(cs ...corev1.Container) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, cs...) }
}

func execProbe(command string, failures int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", command}}},
		PeriodSeconds: 1, FailureThreshold: failures}
}

func resources(req, lim corev1.ResourceList) func(*corev1.Container) {
	return func(c *corev1.Container) { c.Resources = corev1.ResourceRequirements{Requests: req, Limits: lim} }
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func fallback(c *corev1.Container) {
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
}

func podSecurity(f func(s *corev1.PodSecurityContext)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.SecurityContext == nil {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		f(p.Spec.SecurityContext)
	}
}

func security(f func(s *corev1.SecurityContext)) func(*corev1.Container) {
	return func(c *corev1.Container) {
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		f(c.SecurityContext)
	}
}

// Settle conditions.

// terminal: the pod finished and the node is done stopping it (its
// sandbox no longer ready to start containers).
func terminal(p *corev1.Pod) bool {
	return (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) &&
		!condTrue(p, corev1.PodReadyToStartContainers)
}

func condTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func runningReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && condTrue(p, corev1.PodReady)
}

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func statusOf(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, l := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
	}
	return nil
}

// waiting: container name waits with reason (any reason but the default
// ones when reason is empty).
func waiting(name, reason string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		cs := statusOf(p, name)
		if cs == nil || cs.State.Waiting == nil {
			return false
		}
		r := cs.State.Waiting.Reason
		if reason == "" {
			return r != "" && r != "ContainerCreating" && r != "PodInitializing"
		}
		return r == reason
	}
}

// crashLooping: container name restarted at least twice and is not
// running (in back-off: waiting, or showing its exit).
func crashLooping(name string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		cs := statusOf(p, name)
		return cs != nil && cs.RestartCount >= 2 && cs.State.Running == nil
	}
}

// rejected: the pod failed at admission.
func rejected(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed }

// scenarios returns the differential's pods.
func scenarios() []scenario {
	never, onFailure, always := corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways
	sidecar := initC("sidecar", sleeper)
	alwaysRestart := corev1.ContainerRestartPolicyAlways
	sidecar.RestartPolicy = &alwaysRestart
	shared := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		m := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
		for i := range p.Spec.InitContainers {
			p.Spec.InitContainers[i].VolumeMounts = m
		}
		p.Spec.Containers[0].VolumeMounts = m
	}
	trapTerm := "trap 'echo term; sleep 1; exit 0' TERM; touch /tmp/trapped; sleep 3600 & wait"
	return []scenario{
		// restartPolicy × exit code.
		{name: "always-exit0", mod: policy(always), command: "exit 0", done: crashLooping("app")},
		{name: "always-exit1", mod: policy(always), command: "exit 1", done: crashLooping("app")},
		{name: "onfailure-exit0", mod: policy(onFailure), command: "exit 0", done: terminal, steady: terminalTo},
		{name: "onfailure-exit1", mod: policy(onFailure), command: "exit 1", done: crashLooping("app")},
		{name: "never-exit0", mod: policy(never), command: "exit 0", done: terminal, steady: terminalTo},
		{name: "never-exit1", mod: policy(never), command: "exit 1", done: terminal, steady: terminalTo},

		// Init containers.
		{name: "init-ok", mod: withInit(initC("init", "exit 0")), command: sleeper, done: runningReady},
		{name: "init-fail-always", mod: both(policy(always), withInit(initC("init", "exit 1"))), command: sleeper, done: crashLooping("init")},
		{name: "init-fail-onfailure", mod: both(policy(onFailure), withInit(initC("init", "exit 1"))), command: sleeper, done: crashLooping("init")},
		{name: "init-fail-never", mod: both(policy(never), withInit(initC("init", "exit 1"))), command: sleeper, done: terminal, steady: terminalTo},
		{name: "init-two-in-order", mod: both(withInit(initC("first", "touch /work/first"), initC("second", "test -f /work/first")), shared),
			command: sleeper, done: runningReady},
		{name: "sidecar-main-exits", mod: both(policy(never), withInit(sidecar)), command: "exit 0", done: terminal, steady: terminalTo},

		// Probes.
		{name: "liveness-fails", command: sleeper, mod: app(func(c *corev1.Container) { c.LivenessProbe = execProbe("exit 1", 1) }),
			done: crashLooping("app"), deadline: 3 * time.Minute},
		{name: "readiness-fails", command: sleeper, mod: app(func(c *corev1.Container) { c.ReadinessProbe = execProbe("exit 1", 1) }),
			done: running, steady: 5 * time.Second},
		{name: "startup-passes", command: sleeper, mod: app(func(c *corev1.Container) { c.StartupProbe = execProbe("true", 1) }),
			done: runningReady},
		{name: "startup-fails", command: sleeper, mod: app(func(c *corev1.Container) { c.StartupProbe = execProbe("exit 1", 1) }),
			done: crashLooping("app"), deadline: 3 * time.Minute},

		// Termination messages.
		{name: "termmsg-file", mod: policy(never), command: "printf bye >/dev/termination-log; exit 1", done: terminal, steady: terminalTo},
		{name: "fallback-logs", mod: both(policy(never), app(fallback)), command: "echo from-logs; exit 1", done: terminal, steady: terminalTo},
		{name: "fallback-file-wins", mod: both(policy(never), app(fallback)), command: "printf from-file >/dev/termination-log; echo from-logs; exit 1",
			done: terminal, steady: terminalTo},
		{name: "fallback-no-message", mod: both(policy(never), app(fallback)), command: "exit 1", done: terminal, steady: terminalTo},

		// Env expansion: $(A) expands, $(MISSING) stays as written, $$ escapes.
		{name: "env-expansion", mod: both(policy(never), app(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-y"}, {Name: "C", Value: "$(MISSING)-z"}, {Name: "D", Value: "$$(A)"}}
		})), command: `printf '%s %s %s' "$B" "$C" "$D" >/dev/termination-log`, done: terminal, steady: terminalTo},

		// QoS classes.
		{name: "qos-besteffort", command: sleeper, done: runningReady},
		{name: "qos-burstable", command: sleeper, mod: app(resources(list("cpu", "10m", "memory", "16Mi"), nil)), done: runningReady},
		{name: "qos-guaranteed", command: sleeper, mod: app(resources(nil, list("cpu", "100m", "memory", "64Mi"))), done: runningReady},

		// OOM: past a small memory limit.
		{name: "oom-killed", mod: both(policy(never), app(resources(nil, list("memory", "32Mi")))), command: "tail /dev/zero",
			done: terminal, steady: terminalTo},

		// An image that is not there, pulled from a registry that is not there.
		{name: "image-missing", command: sleeper, mod: app(func(c *corev1.Container) {
			c.Image, c.ImagePullPolicy = "localhost/nodekit/missing:test", corev1.PullIfNotPresent
		}), done: waiting("app", "ImagePullBackOff")},

		{name: "host-network", command: sleeper, mod: func(p *corev1.Pod) { p.Spec.HostNetwork = true }, done: runningReady},

		{name: "active-deadline", command: sleeper, mod: func(p *corev1.Pod) { d := int64(5); p.Spec.ActiveDeadlineSeconds = &d },
			done: terminal, steady: terminalTo},

		// Graceful deletion: the container takes a second after TERM.
		{name: "graceful-delete", command: trapTerm, mod: app(func(c *corev1.Container) {
			// Probed once at the start: none runs while it stops.
			c.ReadinessProbe = execProbe("test -f /tmp/trapped", 3)
			c.ReadinessProbe.PeriodSeconds = 60
		}),
			deleteWhen: runningReady, deleteGrace: 10},

		// Security.
		{name: "nonroot-root-image", command: sleeper, mod: podSecurity(func(s *corev1.PodSecurityContext) { yes := true; s.RunAsNonRoot = &yes }),
			done: waiting("app", "")},
		{name: "user-1000-groups", mod: both(policy(never), app(fallback), podSecurity(func(s *corev1.PodSecurityContext) {
			u, g := int64(1000), int64(1000)
			s.RunAsUser, s.RunAsGroup, s.SupplementalGroups = &u, &g, []int64{2000, 3000}
		})), command: "id; exit 1", done: terminal, steady: terminalTo},
		{name: "caps-drop-all", mod: both(policy(never), app(fallback), app(security(func(s *corev1.SecurityContext) {
			s.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
		}))), command: "grep Cap /proc/self/status; exit 1", done: terminal, steady: terminalTo},
		{name: "sysctl-unsafe", command: sleeper, mod: podSecurity(func(s *corev1.PodSecurityContext) {
			s.Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax", Value: "8192"}}
		}), done: rejected, steady: terminalTo},
		{name: "seccomp-missing", command: sleeper, mod: podSecurity(func(s *corev1.PodSecurityContext) {
			f := "nodekit-missing.json"
			s.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &f}
		}), done: waiting("app", "")},
		// A RuntimeClass whose handler the runtime lacks (diffRuntimeClass),
		// and a user namespace on a handler without them (containerd 1.6,
		// and containerd 2's default runc): the sandbox is never created.
		{name: "runtimeclass-unknown-handler", command: sleeper, mod: func(p *corev1.Pod) { c := diffRuntimeClass; p.Spec.RuntimeClassName = &c },
			done: waiting("app", "ContainerCreating"), steady: 10 * time.Second},
		{name: "hostusers-false", command: sleeper, mod: func(p *corev1.Pod) { no := false; p.Spec.HostUsers = &no },
			done: waiting("app", "ContainerCreating"), steady: 10 * time.Second},
		{name: "nonroot-runasuser-0", command: sleeper, mod: podSecurity(func(s *corev1.PodSecurityContext) {
			yes, root := true, int64(0)
			s.RunAsNonRoot, s.RunAsUser = &yes, &root
		}), done: waiting("app", "")},
		{name: "fsgroup", mod: both(policy(never), app(fallback), podSecurity(func(s *corev1.PodSecurityContext) {
			u, g := int64(1000), int64(2000)
			s.RunAsUser, s.FSGroup = &u, &g
		})), command: "id; exit 1", done: terminal, steady: terminalTo},
		// Strict needs the runtime to report the feature (containerd 2
		// does, 1.6 does not: rejected at admission there).
		{name: "supplemental-groups-strict", mod: both(policy(never), app(fallback), podSecurity(func(s *corev1.PodSecurityContext) {
			u, strict := int64(1000), corev1.SupplementalGroupsPolicyStrict
			s.RunAsUser, s.SupplementalGroupsPolicy = &u, &strict
		})), command: "id; exit 1", done: terminal, steady: terminalTo},
		{name: "privileged", mod: both(policy(never), app(fallback), app(security(func(s *corev1.SecurityContext) {
			yes := true
			s.Privileged = &yes
		}))), command: "grep CapEff /proc/self/status; exit 1", done: terminal, steady: terminalTo},
		{name: "no-privilege-escalation", mod: both(policy(never), app(fallback), app(security(func(s *corev1.SecurityContext) {
			no := false
			s.AllowPrivilegeEscalation = &no
		}))), command: "grep NoNewPrivs /proc/self/status; exit 1", done: terminal, steady: terminalTo},
		{name: "seccomp-runtime-default", mod: both(policy(never), app(fallback), podSecurity(func(s *corev1.PodSecurityContext) {
			s.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		})), command: "grep Seccomp: /proc/self/status; exit 1", done: terminal, steady: terminalTo},
		// This host has no AppArmor: the kubelet rejects the pod.
		{name: "apparmor-runtime-default", command: sleeper, mod: app(security(func(s *corev1.SecurityContext) {
			s.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		})), done: rejected, steady: terminalTo},
		{name: "readonly-root-write", mod: both(policy(never), app(fallback), app(security(func(s *corev1.SecurityContext) {
			yes := true
			s.ReadOnlyRootFilesystem = &yes
		}))), command: "touch /x; exit $?", done: terminal, steady: terminalTo},
	}
}

// diffPod builds scenario s's pod for node nodeName: busybox on the pod
// network, no service account token or service links.
func (b *bench) diffPod(s scenario, nodeName string) *corev1.Pod {
	no := false
	grace := int64(30)
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: nodeName, DNSPolicy: corev1.DNSDefault, RestartPolicy: corev1.RestartPolicyAlways,
			AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "app", Command: []string{"sh", "-c", s.command}}},
		},
	}
	if s.mod != nil {
		s.mod(p)
	}
	for _, l := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range l {
			if l[i].Image == "" {
				l[i].Image, l[i].ImagePullPolicy = b.c.BusyboxImage, corev1.PullNever
			}
		}
	}
	return p
}
