package podsync_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
)

// The pure planner and status generator on a pod of one container: nothing
// runs yet, so the plan is a sandbox and the container; once both run the
// plan is empty and the pod is Running and Ready. A backend (podsync/cri on
// a container runtime, podsync/podsynctest's simulation, a virtual node's
// own) carries such plans out under the Engine.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	app := corev1.Container{Name: "app", Image: "nginx:1.25"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{HostNetwork: true, RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{app}}}

	a := podsync.ComputePodActions(podsync.PlanInput{Pod: pod, State: &podsync.PodState{}, Now: now})
	fmt.Printf("empty: sandbox=%v attempt=%d start=%d\n", a.CreateSandbox, a.Attempt, len(a.Start))

	st := &podsync.PodState{
		Sandboxes: []*podsync.SandboxState{{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, HostNetwork: true, CreatedAt: now}},
		Containers: []*podsync.ContainerState{{ID: "c1", SandboxID: "sb1", Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING,
			Hash: podsync.HashContainer(&app), StartedAt: now}},
	}
	a = podsync.ComputePodActions(podsync.PlanInput{Pod: pod, State: st, Now: now})
	fmt.Println("running: nothing to do:", a.Empty())

	s := podsync.GeneratePodStatus(podsync.StatusInput{Pod: pod, State: st, RuntimeName: "example", HostIPs: []string{"192.0.2.10"}, Now: now})
	fmt.Println(s.Phase, s.PodIP, s.QOSClass, s.ContainerStatuses[0].ContainerID, *s.ContainerStatuses[0].Started)
	// Output:
	// empty: sandbox=true attempt=0 start=1
	// running: nothing to do: true
	// Running 192.0.2.10 BestEffort example://c1 true
}
