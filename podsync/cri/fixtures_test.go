package cri

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/probe"
)

// Fixtures as podsync's own tests have them.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	pod.Spec.RestartPolicy = policy
	pod.Spec.HostNetwork = true
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox:1.36"})
	}
	return pod
}

func withInit(pod *corev1.Pod, sidecar bool, names ...string) *corev1.Pod {
	for _, n := range names {
		c := corev1.Container{Name: n, Image: "busybox:1.36"}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	return pod
}

func withEphemeral(pod *corev1.Pod, names ...string) *corev1.Pod {
	for _, n := range names {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: "busybox:1.36"}, TargetContainerName: "a"})
	}
	return pod
}

func readySandbox() *podsync.SandboxState {
	return &podsync.SandboxState{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, HostNetwork: true, CreatedAt: t0}
}

func running(pod *corev1.Pod, name string) *podsync.ContainerState {
	return &podsync.ContainerState{ID: "c-" + name, SandboxID: "sb1", Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Hash: podsync.HashContainer(&corev1.Container{Name: name, Image: "busybox:1.36"}), StartedAt: t0}
}

func exited(pod *corev1.Pod, name string, code int32) *podsync.ContainerState {
	c := running(pod, name)
	c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, t0.Add(time.Second)
	return c
}

type fakeProbes map[string]probe.Update // "name/Type"

func (f fakeProbes) Latest(_ types.UID, name string, t probe.Type) (probe.Update, bool) {
	u, ok := f[name+"/"+t.String()]
	return u, ok
}
func (f fakeProbes) UpdatePodStatus(*corev1.Pod, *corev1.PodStatus) {}

func cond(s corev1.PodStatus, t corev1.PodConditionType) string {
	for _, c := range s.Conditions {
		if c.Type == t {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return "missing"
}
