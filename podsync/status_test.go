package podsync_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
)

func TestGeneratePodStatus(t *testing.T) {
	always, never := corev1.RestartPolicyAlways, corev1.RestartPolicyNever
	sb := []*podsync.SandboxState{readySandbox()}
	cases := []struct {
		name    string
		pod     *corev1.Pod
		state   func(p *corev1.Pod) *podsync.PodState
		waiting map[string]podsync.Waiting
		term    bool
		phase   corev1.PodPhase
		ready   string
		check   func(t *testing.T, s corev1.PodStatus)
	}{{
		name:  "nothing yet: Pending, ContainerCreating",
		pod:   testPod(always, "a"),
		state: func(*corev1.Pod) *podsync.PodState { return nil },
		phase: corev1.PodPending, ready: "False/ContainersNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			if s.ContainerStatuses[0].State.Waiting.Reason != podsync.ReasonContainerCreating || cond(s, corev1.PodReadyToStartContainers) != "False/PodSandboxNotReady" ||
				condition(s, corev1.PodReadyToStartContainers).Message != "no pod sandbox exists" {
				t.Errorf("%+v", s)
			}
		},
	}, {
		name: "running: Running and Ready, host IP as pod IP",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		phase: corev1.PodRunning, ready: "True/",
		check: func(t *testing.T, s corev1.PodStatus) {
			cs := s.ContainerStatuses[0]
			if s.PodIP != "192.0.2.1" || cs.ContainerID != "containerd://c-a" || !*cs.Started || s.QOSClass != corev1.PodQOSBestEffort {
				t.Errorf("%+v", s)
			}
		},
	}, {
		name: "ephemeral containers: own statuses, no effect on phase or readiness",
		pod:  withEphemeral(testPod(always, "a"), "shell", "done", "new"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "a"), running(p, "shell"), exited(p, "done", 3)}}
		},
		phase: corev1.PodRunning, ready: "True/",
		check: func(t *testing.T, s corev1.PodStatus) {
			es := s.EphemeralContainerStatuses
			if len(es) != 3 || es[0].State.Running == nil || es[0].ContainerID != "containerd://c-shell" ||
				es[1].State.Terminated == nil || es[1].State.Terminated.ExitCode != 3 ||
				es[2].State.Waiting == nil || es[2].State.Waiting.Reason != podsync.ReasonContainerCreating || es[0].Ready {
				t.Errorf("ephemeral statuses %+v", es)
			}
		},
	}, {
		name: "crash loop: Waiting CrashLoopBackOff with the exit as last state",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			c := exited(p, "a", 2)
			c.RestartCount = 3
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{c}}
		},
		waiting: map[string]podsync.Waiting{"a": {Reason: podsync.ReasonCrashLoopBackOff, Message: "back-off 40s"}},
		phase:   corev1.PodRunning, ready: "False/ContainersNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			cs := s.ContainerStatuses[0]
			if cs.State.Waiting.Reason != podsync.ReasonCrashLoopBackOff || cs.LastTerminationState.Terminated.ExitCode != 2 ||
				cs.LastTerminationState.Terminated.Reason != "Error" || cs.RestartCount != 3 {
				t.Errorf("%+v", cs)
			}
		},
	}, {
		name: "Never, exit 3: Failed",
		pod:  testPod(never, "a", "b"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{exited(p, "a", 0), exited(p, "b", 3)}}
		},
		phase: corev1.PodFailed, ready: "False/PodFailed",
	}, {
		name: "Never, all exit 0: Succeeded",
		pod:  testPod(never, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{exited(p, "a", 0)}}
		},
		phase: corev1.PodSucceeded, ready: "False/PodCompleted",
		check: func(t *testing.T, s corev1.PodStatus) {
			if r := s.ContainerStatuses[0].State.Terminated.Reason; r != "Completed" {
				t.Errorf("reason %s", r)
			}
		},
	}, {
		name: "init running: Pending, PodInitializing",
		pod:  withInit(testPod(always, "a"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "i1")}}
		},
		phase: corev1.PodPending, ready: "False/ContainersNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			if s.ContainerStatuses[0].State.Waiting.Reason != podsync.ReasonPodInitializing || cond(s, corev1.PodInitialized) != "False/ContainersNotInitialized" {
				t.Errorf("%+v", s)
			}
		},
	}, {
		name: "init failed under Never: Failed",
		pod:  withInit(testPod(never, "a"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{exited(p, "i1", 1)}}
		},
		phase: corev1.PodFailed, ready: "False/PodFailed",
	}, {
		name: "init failed under Never, terminated: not initialized, the app container waits PodInitializing",
		pod:  withInit(testPod(never, "a"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb := readySandbox()
			sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb}, Containers: []*podsync.ContainerState{exited(p, "i1", 1)}}
		},
		term:  true,
		phase: corev1.PodFailed, ready: "False/PodFailed",
		check: func(t *testing.T, s corev1.PodStatus) {
			if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != podsync.ReasonPodInitializing {
				t.Errorf("app container %+v, want waiting PodInitializing", s.ContainerStatuses[0].State)
			}
			if ts := s.InitContainerStatuses[0].State.Terminated; ts == nil || ts.ExitCode != 1 || ts.Reason != "Error" {
				t.Errorf("init container %+v, want its exit", s.InitContainerStatuses[0].State)
			}
			if c := condition(s, corev1.PodInitialized); c.Status != corev1.ConditionFalse || c.Reason != podsync.ReasonContainersNotInitialized ||
				c.Message != "containers with incomplete status: [i1]" {
				t.Errorf("Initialized %+v", c)
			}
			if c := condition(s, corev1.PodReadyToStartContainers); c.Reason != podsync.ReasonPodSandboxNotReady || c.Message != "pod sandbox is not ready" {
				t.Errorf("PodReadyToStartContainers %+v", c)
			}
		},
	}, {
		name: "second init container never ran when the first failed, terminated: only the first is marked",
		pod:  withInit(testPod(never, "a"), false, "i1", "i2"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Containers: []*podsync.ContainerState{running(p, "i1")}}
		},
		term:  true,
		phase: corev1.PodFailed, ready: "False/PodFailed",
		check: func(t *testing.T, s corev1.PodStatus) {
			if ts := s.InitContainerStatuses[0].State.Terminated; ts == nil || ts.Reason != podsync.ReasonContainerStatusUnknown {
				t.Errorf("first init container %+v, want ContainerStatusUnknown", s.InitContainerStatuses[0].State)
			}
			if w := s.InitContainerStatuses[1].State.Waiting; w == nil || w.Reason != podsync.ReasonPodInitializing {
				t.Errorf("second init container %+v, want waiting", s.InitContainerStatuses[1].State)
			}
			if w := s.ContainerStatuses[0].State.Waiting; w == nil {
				t.Errorf("app container %+v, want waiting", s.ContainerStatuses[0].State)
			}
		},
	}, {
		name: "Succeeded with init containers: Initialized True, reason PodCompleted",
		pod:  withInit(testPod(never, "a"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{exited(p, "a", 0), exited(p, "i1", 0)}}
		},
		phase: corev1.PodSucceeded, ready: "False/PodCompleted",
		check: func(t *testing.T, s corev1.PodStatus) {
			if got := cond(s, corev1.PodInitialized); got != "True/PodCompleted" {
				t.Errorf("Initialized %s", got)
			}
			if got := cond(s, corev1.ContainersReady); got != "False/PodCompleted" {
				t.Errorf("ContainersReady %s", got)
			}
		},
	}, {
		name: "unready containers listed in the spec's order",
		pod:  testPod(always, "b", "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb}
		},
		phase: corev1.PodPending, ready: "False/ContainersNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			if m := condition(s, corev1.PodReady).Message; m != "containers with unready status: [b a]" {
				t.Errorf("Ready message %q", m)
			}
		},
	}, {
		name: "pod network sandbox without an IP: not ready to start containers",
		pod: func() *corev1.Pod {
			p := testPod(always, "a")
			p.Spec.HostNetwork = false
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb := readySandbox()
			sb.HostNetwork = false
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb}}
		},
		phase: corev1.PodPending, ready: "False/ContainersNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			if c := condition(s, corev1.PodReadyToStartContainers); c.Reason != podsync.ReasonPodSandboxNotReady || c.Message != "pod sandbox has no IP address" {
				t.Errorf("PodReadyToStartContainers %+v", c)
			}
		},
	}, {
		name: "finished on the pod network, sandbox stopped: the pod IP is kept",
		pod: func() *corev1.Pod {
			p := testPod(never, "a")
			p.Spec.HostNetwork = false
			p.Status.PodIP, p.Status.PodIPs = "10.0.0.7", []corev1.PodIP{{IP: "10.0.0.7"}}
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb := readySandbox()
			sb.HostNetwork, sb.State = false, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb}, Containers: []*podsync.ContainerState{exited(p, "a", 0)}}
		},
		term:  true,
		phase: corev1.PodSucceeded, ready: "False/PodCompleted",
		check: func(t *testing.T, s corev1.PodStatus) {
			if s.PodIP != "10.0.0.7" || len(s.PodIPs) != 1 || s.PodIPs[0].IP != "10.0.0.7" {
				t.Errorf("podIP %q, podIPs %v: want the one it had", s.PodIP, s.PodIPs)
			}
		},
	}, {
		name: "observed generation: on the status and on each condition the node writes",
		pod: func() *corev1.Pod {
			p := testPod(always, "a")
			p.Generation = 3 // a deletion or an update moved it past the scheduler's write
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, ObservedGeneration: 1}}
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		phase: corev1.PodRunning, ready: "True/",
		check: func(t *testing.T, s corev1.PodStatus) {
			if s.ObservedGeneration != 3 {
				t.Errorf("observedGeneration %d, want 3", s.ObservedGeneration)
			}
			if got := cond(s, corev1.PodScheduled); got != "True/" {
				t.Errorf("PodScheduled %s", got)
			}
			for _, c := range s.Conditions {
				if c.ObservedGeneration != 3 {
					t.Errorf("condition %s: observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
				}
			}
		},
	}, {
		name: "volume mounts, resources and allocated resources in container statuses",
		pod: func() *corev1.Pod {
			p := testPod(always, "a", "b")
			for i := range p.Spec.Containers {
				p.Spec.Containers[i].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "cfg", MountPath: "/cfg", ReadOnly: true}}
				p.Spec.Containers[i].Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
			}
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		phase: corev1.PodPending, ready: "False/ContainersNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			for _, cs := range s.ContainerStatuses {
				vm := cs.VolumeMounts
				if len(vm) != 2 || vm[0].Name != "data" || vm[0].MountPath != "/data" || vm[0].ReadOnly || vm[0].RecursiveReadOnly != nil ||
					!vm[1].ReadOnly || vm[1].RecursiveReadOnly == nil || *vm[1].RecursiveReadOnly != corev1.RecursiveReadOnlyDisabled {
					t.Errorf("%s: volume mounts %+v", cs.Name, vm)
				}
			}
			a, b := s.ContainerStatuses[0], s.ContainerStatuses[1]
			if a.Resources == nil || a.Resources.Limits.Memory().String() != "64Mi" || a.AllocatedResources.Cpu().String() != "10m" {
				t.Errorf("running container: resources %+v, allocated %v", a.Resources, a.AllocatedResources)
			}
			if b.Resources != nil || b.AllocatedResources != nil {
				t.Errorf("container not created yet: resources %+v, allocated %v, want none", b.Resources, b.AllocatedResources)
			}
			// The pod's: the sums.
			if s.Resources == nil || s.Resources.Requests.Cpu().String() != "20m" || s.Resources.Limits.Memory().String() != "128Mi" ||
				s.AllocatedResources.Cpu().String() != "20m" {
				t.Errorf("pod resources %+v, allocated %v", s.Resources, s.AllocatedResources)
			}
		},
	}, {
		name: "the user the runtime reports",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			c := running(p, "a")
			c.User = &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: 1000, GID: 1000, SupplementalGroups: []int64{1000, 2000}}}
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{c}}
		},
		phase: corev1.PodRunning, ready: "True/",
		check: func(t *testing.T, s corev1.PodStatus) {
			u := s.ContainerStatuses[0].User
			if u == nil || u.Linux == nil || u.Linux.UID != 1000 || len(u.Linux.SupplementalGroups) != 2 {
				t.Errorf("user %+v", u)
			}
		},
	}, {
		name: "terminal phase is kept",
		pod: func() *corev1.Pod {
			p := testPod(always, "a")
			p.Status.Phase = corev1.PodSucceeded
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		phase: corev1.PodSucceeded, ready: "False/PodCompleted",
	}, {
		name:  "terminated with a container lost: ContainerStatusUnknown 137, Failed",
		pod:   testPod(always, "a"),
		state: func(*corev1.Pod) *podsync.PodState { return &podsync.PodState{} },
		term:  true,
		phase: corev1.PodFailed, ready: "False/PodFailed",
		check: func(t *testing.T, s corev1.PodStatus) {
			if ts := s.ContainerStatuses[0].State.Terminated; ts == nil || ts.ExitCode != 137 || ts.Reason != podsync.ReasonContainerStatusUnknown {
				t.Errorf("%+v", s.ContainerStatuses[0])
			}
		},
	}, {
		name: "readiness gate not satisfied",
		pod: func() *corev1.Pod {
			p := testPod(always, "a")
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		phase: corev1.PodRunning, ready: "False/ReadinessGatesNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			if m := condition(s, corev1.PodReady).Message; m != `corresponding condition of pod readiness gate "example.com/lb" does not exist.` {
				t.Errorf("Ready message %q", m)
			}
		},
	}, {
		name: "readiness gates: one False, one missing",
		pod: func() *corev1.Pod {
			p := testPod(always, "a")
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
			p.Status.Conditions = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionFalse}}
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: sb, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		phase: corev1.PodRunning, ready: "False/ReadinessGatesNotReady",
		check: func(t *testing.T, s corev1.PodStatus) {
			want := `the status of pod readiness gate "example.com/lb" is not "True", but False, corresponding condition of pod readiness gate "example.com/dns" does not exist.`
			if m := condition(s, corev1.PodReady).Message; m != want {
				t.Errorf("Ready message %q, want %q", m, want)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := podsync.GeneratePodStatus(podsync.StatusInput{Pod: tc.pod, State: tc.state(tc.pod), Waiting: tc.waiting, HostIPs: []string{"192.0.2.1"}, Now: t0, Terminated: tc.term})
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			if got := cond(s, corev1.PodReady); got != tc.ready {
				t.Errorf("Ready %s, want %s", got, tc.ready)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}
