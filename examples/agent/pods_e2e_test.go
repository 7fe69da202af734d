package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/remote"
)

// sleeper is the command of the test pods: it sleeps until SIGTERM and then
// exits at once.
const sleeper = `trap 'exit 0' TERM; sleep 3600 & wait`

// staticManifest is a host-network busybox pod manifest for the file source.
func staticManifest(name, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", %q]
`, name, image, sleeper)
}

// criClient connects to the harness's containerd for the test's own checks,
// and, at cleanup (after the agent is gone), removes whatever sandboxes the
// agent left: like kubelet, it leaves pods running when it stops.
func criClient(t *testing.T, c *containerdtest.Containerd) *remote.Client {
	t.Helper()
	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if sbs, err := rt.ListPodSandbox(ctx, nil); err == nil {
			for _, sb := range sbs {
				_ = rt.StopPodSandbox(ctx, sb.Id)
				_ = rt.RemovePodSandbox(ctx, sb.Id)
			}
		}
		_ = rt.Close()
	})
	return rt
}

// runningContainer reports whether containerd runs a container of the pod
// named pod (kubelet's io.kubernetes.pod.name label).
func runningContainer(rt *remote.Client, pod string) bool {
	cs, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.name": pod},
	})
	return err == nil && len(cs) > 0
}

// runtimeEmpty reports whether containerd holds no sandbox and no container.
func runtimeEmpty(rt *remote.Client) bool {
	ctx := context.Background()
	sbs, err1 := rt.ListPodSandbox(ctx, nil)
	cs, err2 := rt.ListContainers(ctx, nil)
	return err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podArgs are the agent's pod-half flags on the harness's containerd.
func podArgs(t *testing.T, c *containerdtest.Containerd, manifests string) []string {
	return []string{
		"--container-runtime-endpoint=" + c.Endpoint,
		"--pod-manifest-path=" + manifests,
		"--file-check-frequency=1s",
		"--root-dir=" + t.TempDir(),
		"--pod-log-root=" + c.PodLogRoot,
		"--cgroup-root=" + c.CgroupRoot,
		"--resolv-conf=",
		sharedDiskArgs[0], sharedDiskArgs[1], sharedDiskArgs[2],
	}
}

// sharedDiskArgs run the agent as the kubelet is run on shared machines: a
// full disk elsewhere neither evicts the tests' pods nor removes the
// harness's images.
var sharedDiskArgs = [...]string{
	"--image-gc-high-threshold=100", "--image-gc-low-threshold=99",
	"--eviction-hard=memory.available<1Mi,nodefs.available<1%,nodefs.inodesFree<1%,imagefs.available<1%,imagefs.inodesFree<1%",
}

// The agent runs a static pod from its manifest directory (with a mirror pod
// in the API server) and a pod the API server binds to it, on containerd,
// and removes both when the manifest and the API pod are deleted. On
// containerd 1.x, which has no container events, it relists.
func TestAgentRunsPodsOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	agentRunsPods(t, cp, c, "", "The container runtime has no container events; relisting")
}

// TestAgentRunsPodsOnContainerd2 is TestAgentRunsPodsOnContainerd on
// containerd 2, whose CRI container events the agent's pod half uses in
// place of most relists.
func TestAgentRunsPodsOnContainerd2(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need2(t, ctrd2)
	agentRunsPods(t, cp, c, "2", "Container events in use; relisting less often")
}

// agentRunsPods runs the pods test on c with node and pod names ending in
// suffix, and checks that the agent's log says observe, the line that
// tells how its pod half observes the runtime.
func agentRunsPods(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix, observe string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()

	node := "e2e-pods" + suffix
	manifests := t.TempDir()
	manifest := filepath.Join(manifests, "static.yaml")
	if err := os.WriteFile(manifest, []byte(staticManifest("static-web"+suffix, c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, node, podArgs(t, c, manifests)...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	grace := int64(30)
	apiPod, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api-web" + suffix, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", sleeper}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = admin.CoreV1().Pods("default").Delete(context.Background(), apiPod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})

	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "API pod Running and Ready in the API", func() bool {
		got, err := admin.CoreV1().Pods("default").Get(ctx, apiPod.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodRunning && podReady(got)
	})
	t.Logf("API pod Running and Ready %v after the agent started", time.Since(p.started).Round(time.Millisecond))
	mirrorName := "static-web" + suffix + "-" + node
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "mirror pod of the static pod Running in the API", func() bool {
		got, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		return err == nil && got.Annotations[corev1.MirrorPodAnnotationKey] != "" && got.Status.Phase == corev1.PodRunning
	})
	if !runningContainer(rt, mirrorName) || !runningContainer(rt, apiPod.Name) {
		t.Fatalf("containerd does not run both pods' containers")
	}
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "Started event of the API pod from kubelet on the node", func() bool {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + apiPod.Name + ",reason=Started"})
		return err == nil && len(evs.Items) > 0 && evs.Items[0].Source.Component == "kubelet" && evs.Items[0].Source.Host == node
	})
	t.Logf("both pods Running %v after the agent started", time.Since(p.started).Round(time.Millisecond))
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the agent's log line "+strconv.Quote(observe), func() bool {
		return strings.Contains(p.log.String(), observe)
	})

	deleted := time.Now()
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, apiPod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty after the pods were deleted", func() bool {
		return runtimeEmpty(rt)
	})
	t.Logf("containerd empty %v after deletion", time.Since(deleted).Round(time.Millisecond))
	testenv.Eventually(t, 10*time.Second, 100*time.Millisecond, "no mount of containerd's left", func() bool {
		return len(c.Mounts()) == 0
	})
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "API pod and mirror pod gone from the API", func() bool {
		_, err1 := admin.CoreV1().Pods("default").Get(ctx, apiPod.Name, metav1.GetOptions{})
		_, err2 := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2)
	})
	t.Logf("both pods removed %v after deletion", time.Since(deleted).Round(time.Millisecond))
	p.stop(t)
}

// Without --kubeconfig the agent runs static pods alone: no API server.
func TestAgentStandaloneStaticPod(t *testing.T) {
	c := containerdtest.Need(t, ctrd)
	rt := criClient(t, c)
	const node = "e2e-standalone"
	manifests := t.TempDir()
	manifest := filepath.Join(manifests, "static.yaml")
	if err := os.WriteFile(manifest, []byte(staticManifest("static-sa", c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startStandalone(t, node, podArgs(t, c, manifests)...)
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "static pod's container running in containerd", func() bool {
		return runningContainer(rt, "static-sa-"+node)
	})
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty after the manifest was removed", func() bool {
		return runtimeEmpty(rt)
	})
	testenv.Eventually(t, 10*time.Second, 100*time.Millisecond, "no mount of containerd's left", func() bool {
		return len(c.Mounts()) == 0
	})
	p.stop(t)
}
