package runtime_test

import (
	"context"
	"fmt"
	"log"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// Run a pod through the Runtime interface: here on the fake, which the same
// code would run on runtime/remote's Client.
func Example_runPod() {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	var rt runtime.Runtime = runtimetest.New(runtimetest.Options{Clock: clock})

	sandboxConfig := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "0b0e4a3c"},
		Hostname: "", // host network: the node's name
		Labels:   map[string]string{"io.kubernetes.pod.name": "web"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	sandboxID, err := rt.RunPodSandbox(ctx, sandboxConfig, "")
	if err != nil {
		log.Fatal(err)
	}
	containerID, err := rt.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "server"},
		Image:    &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage},
		Command:  []string{"httpd", "-f"},
		Labels:   map[string]string{"io.kubernetes.container.name": "server"},
	}, sandboxConfig)
	if err != nil {
		log.Fatal(err)
	}
	clock.Step(time.Second)
	if err := rt.StartContainer(ctx, containerID); err != nil {
		log.Fatal(err)
	}

	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandboxID})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range containers {
		fmt.Println(c.Metadata.Name, c.State)
	}
	status, err := rt.ContainerStatus(ctx, containerID, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("started", time.Unix(0, status.Status.StartedAt).UTC().Format(time.TimeOnly))

	res, err := rt.ExecSync(ctx, containerID, []string{"true"}, time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exec exit code", res.ExitCode)

	if err := rt.StopPodSandbox(ctx, sandboxID); err != nil {
		log.Fatal(err)
	}
	if err := rt.RemovePodSandbox(ctx, sandboxID); err != nil {
		log.Fatal(err)
	}
	_, err = rt.ContainerStatus(ctx, containerID, false)
	fmt.Println("removed:", runtime.IsNotFound(err))
	// Output:
	// server CONTAINER_RUNNING
	// started 12:00:01
	// exec exit code 0
	// removed: true
}
