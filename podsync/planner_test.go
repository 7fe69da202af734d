package podsync_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/probe"
)

func refs(init bool, idx ...int) []podsync.ContainerRef {
	var r []podsync.ContainerRef
	for _, i := range idx {
		r = append(r, podsync.ContainerRef{Init: init, Index: i})
	}
	return r
}

func TestComputePodActions(t *testing.T) {
	always, never, onFailure := corev1.RestartPolicyAlways, corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure
	type want struct {
		killPod, create bool
		attempt         uint32
		kill            []string
		start           []podsync.ContainerRef
		backOff         []string
		initFailed      bool
	}
	cases := []struct {
		name   string
		pod    *corev1.Pod
		state  func(pod *corev1.Pod) *podsync.PodState
		probes fakeProbes
		wait   time.Duration // crash-loop wait of every key
		now    time.Time
		want   want
	}{{
		name:  "no sandbox: create one, start every container",
		pod:   testPod(always, "a", "b"),
		state: func(*corev1.Pod) *podsync.PodState { return &podsync.PodState{} },
		want:  want{killPod: true, create: true, start: refs(false, 0, 1)},
	}, {
		name: "sandbox not ready: new attempt, restart every container",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb := readySandbox()
			sb.State, sb.Attempt = runtimeapi.PodSandboxState_SANDBOX_NOTREADY, 2
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb}, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		want: want{killPod: true, create: true, attempt: 3, start: refs(false, 0)},
	}, {
		name: "two ready sandboxes",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb2 := readySandbox()
			sb2.ID, sb2.Attempt = "sb2", 1
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb2, readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		want: want{killPod: true, create: true, attempt: 2, start: refs(false, 0)},
	}, {
		name: "network mode changed",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb := readySandbox()
			sb.HostNetwork, sb.IPs = false, []string{"10.0.0.2"}
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb}, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		want: want{killPod: true, create: true, attempt: 1, start: refs(false, 0)},
	}, {
		name:  "new sandbox with init containers starts the first init container",
		pod:   withInit(testPod(always, "a"), false, "i1", "i2"),
		state: func(*corev1.Pod) *podsync.PodState { return &podsync.PodState{} },
		want:  want{killPod: true, create: true, start: refs(true, 0)},
	}, {
		name: "sandbox died under Never after containers ran: no new sandbox",
		pod:  testPod(never, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb := readySandbox()
			sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb}, Containers: []*podsync.ContainerState{exited(p, "a", 0)}}
		},
		want: want{killPod: true, attempt: 1},
	}, {
		name: "new sandbox under OnFailure skips containers that succeeded",
		pod:  testPod(onFailure, "a", "b"),
		state: func(p *corev1.Pod) *podsync.PodState {
			sb := readySandbox()
			sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{sb}, Containers: []*podsync.ContainerState{exited(p, "a", 0), exited(p, "b", 1)}}
		},
		want: want{killPod: true, create: true, attempt: 1, start: refs(false, 1)},
	}, {
		name: "all running and unchanged: nothing to do",
		pod:  testPod(always, "a", "b"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), running(p, "b")}}
		},
	}, {
		name: "hash changed: kill and recreate",
		pod: func() *corev1.Pod {
			p := testPod(always, "a", "b")
			p.Spec.Containers[1].Image = "busybox:1.37"
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), running(p, "b")}}
		},
		want: want{kill: []string{"b"}, start: refs(false, 1)},
	}, {
		name: "liveness failure: kill and restart",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		probes: fakeProbes{"a/Liveness": {ContainerID: "containerd://c-a", Result: probe.Failure}},
		want:   want{kill: []string{"a"}, start: refs(false, 0)},
	}, {
		name: "liveness failure with an earlier exit in back-off: kill, the restart held back",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			old := exited(p, "a", 0)
			old.ID = "c-a-0"
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), old}}
		},
		probes: fakeProbes{"a/Liveness": {ContainerID: "containerd://c-a", Result: probe.Failure}},
		wait:   10 * time.Second, now: t0.Add(5 * time.Second),
		want: want{kill: []string{"a"}, backOff: []string{"a"}},
	}, {
		name: "liveness failure with an earlier exit whose back-off is over: kill and restart",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			old := exited(p, "a", 0)
			old.ID = "c-a-0"
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), old}}
		},
		probes: fakeProbes{"a/Liveness": {ContainerID: "containerd://c-a", Result: probe.Failure}},
		wait:   10 * time.Second, now: t0.Add(12 * time.Second),
		want: want{kill: []string{"a"}, start: refs(false, 0)},
	}, {
		name: "liveness failure of an older container ID is ignored",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		probes: fakeProbes{"a/Liveness": {ContainerID: "containerd://old", Result: probe.Failure}},
	}, {
		name: "startup failure under Never: kill, no restart, then the pod",
		pod:  testPod(never, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		probes: fakeProbes{"a/Startup": {ContainerID: "c-a", Result: probe.Failure}},
		want:   want{killPod: true},
	}, {
		name: "exited under Always: restart at once the first time",
		pod:  testPod(always, "a", "b"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), exited(p, "b", 0)}}
		},
		want: want{start: refs(false, 1)},
	}, {
		name: "exited in back-off: held, pod kept",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 1)}}
		},
		wait: 10 * time.Second, now: t0.Add(5 * time.Second),
		want: want{backOff: []string{"a"}},
	}, {
		name: "exited, back-off over: restart",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 1)}}
		},
		wait: 10 * time.Second, now: t0.Add(11 * time.Second),
		want: want{start: refs(false, 0)},
	}, {
		name: "OnFailure: exit 0 stays, exit 1 restarts",
		pod:  testPod(onFailure, "a", "b"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 0), exited(p, "b", 1)}}
		},
		want: want{start: refs(false, 1)},
	}, {
		name: "Never: all exited, kill the pod",
		pod:  testPod(never, "a", "b"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 0), exited(p, "b", 1)}}
		},
		want: want{killPod: true},
	}, {
		name: "Never: one still running, keep",
		pod:  testPod(never, "a", "b"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 0), running(p, "b")}}
		},
	}, {
		name: "init containers run in order: second after the first succeeded",
		pod:  withInit(testPod(always, "a"), false, "i1", "i2"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "i1", 0)}}
		},
		want: want{start: refs(true, 1)},
	}, {
		name: "init container running: wait",
		pod:  withInit(testPod(always, "a"), false, "i1", "i2"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "i1", 0), running(p, "i2")}}
		},
	}, {
		name: "inits done: start regular containers",
		pod:  withInit(testPod(always, "a", "b"), false, "i1", "i2"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "i2", 0), exited(p, "i1", 0)}}
		},
		want: want{start: refs(false, 0, 1)},
	}, {
		name: "failed init under Never: kill the pod",
		pod:  withInit(testPod(never, "a"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "i1", 2)}}
		},
		want: want{killPod: true, initFailed: true},
	}, {
		name: "failed init under OnFailure: restart it",
		pod:  withInit(testPod(onFailure, "a"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "i1", 2)}}
		},
		want: want{start: refs(true, 0)},
	}, {
		name: "OOMKilled init with exit 0 counts as failed",
		pod:  withInit(testPod(always, "a"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			c := exited(p, "i1", 0)
			c.Reason = "OOMKilled"
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{c}}
		},
		want: want{start: refs(true, 0)},
	}, {
		name: "sidecar started, then the next init container",
		pod:  withInit(withInit(testPod(always, "a"), true, "side"), false, "i1"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "side")}}
		},
		want: want{start: refs(true, 1)},
	}, {
		name: "sidecar with a startup probe not yet successful: wait",
		pod: func() *corev1.Pod {
			p := withInit(withInit(testPod(always, "a"), true, "side"), false, "i1")
			p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{}
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "side")}}
		},
		probes: fakeProbes{},
	}, {
		name: "exited sidecar is restarted while regular containers run",
		pod:  withInit(testPod(always, "a"), true, "side"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), exited(p, "side", 1)}}
		},
		want: want{start: refs(true, 0)},
	}, {
		name: "restartPolicyRules: exit 42 restarts under Never, exit 1 does not",
		pod: func() *corev1.Pod {
			p := testPod(never, "a", "b")
			for i := range p.Spec.Containers {
				p.Spec.Containers[i].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
					ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
			}
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 42), exited(p, "b", 1)}}
		},
		want: want{start: refs(false, 0)},
	}, {
		name: "container restartPolicy OnFailure overrides the pod's Always",
		pod: func() *corev1.Pod {
			p := testPod(always, "a")
			onf := corev1.ContainerRestartPolicyOnFailure
			p.Spec.Containers[0].RestartPolicy = &onf
			return p
		}(),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 0)}}
		},
		want: want{killPod: true},
	}, {
		name: "stray running duplicate is killed",
		pod:  testPod(always, "a"),
		state: func(p *corev1.Pod) *podsync.PodState {
			old := running(p, "a")
			old.ID = "c-old"
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), old}}
		},
		want: want{kill: []string{"a"}},
	}, {
		name: "ephemeral container: started once in the running pod, before anything else",
		pod:  withEphemeral(testPod(always, "a"), "debug"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a")}}
		},
		want: want{start: []podsync.ContainerRef{{Ephemeral: true}}},
	}, {
		name: "ephemeral container that exited is not restarted, a running one is not a stray",
		pod:  withEphemeral(testPod(always, "a"), "done", "shell"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{running(p, "a"), exited(p, "done", 1), running(p, "shell")}}
		},
		want: want{},
	}, {
		name:  "ephemeral containers wait for a sandbox to be created",
		pod:   withEphemeral(testPod(always, "a"), "debug"),
		state: func(*corev1.Pod) *podsync.PodState { return &podsync.PodState{} },
		want:  want{killPod: true, create: true, start: refs(false, 0)},
	}, {
		name: "an ephemeral container alone does not keep a finished pod",
		pod:  withEphemeral(testPod(never, "a"), "debug"),
		state: func(p *corev1.Pod) *podsync.PodState {
			return &podsync.PodState{Sandboxes: []*podsync.SandboxState{readySandbox()}, Containers: []*podsync.ContainerState{exited(p, "a", 0)}}
		},
		want: want{killPod: true},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := podsync.PlanInput{Pod: tc.pod, State: tc.state(tc.pod), Now: tc.now}
			if tc.probes != nil {
				in.Probes = tc.probes
			}
			if tc.wait > 0 {
				in.CrashLoopWait = func(string, time.Time) time.Duration { return tc.wait }
			}
			a := podsync.ComputePodActions(in)
			var got want
			got.killPod, got.create, got.attempt, got.start, got.initFailed = a.KillPod, a.CreateSandbox, a.Attempt, a.Start, a.InitFailed
			for _, k := range a.Kill {
				got.kill = append(got.kill, k.Name)
			}
			for _, b := range a.BackOff {
				got.backOff = append(got.backOff, b.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
