package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// Under memory pressure (a hard threshold no node can meet) the node
// reports MemoryPressure from the eviction manager, an API pod is evicted
// or refused with kubelet's reason Evicted and ends Failed, and the static
// pod, critical, keeps running; on containerd 1.x and 2.
func TestAgentEvictsUnderPressureOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	onBothRuntimes(t, func(t *testing.T, c *containerdtest.Containerd, suffix string) { evictsUnderPressure(t, cp, c, suffix) })
}

func evictsUnderPressure(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()

	node := "e2e-eviction" + suffix
	evictable := "evictable" + suffix
	manifests := t.TempDir()
	if err := os.WriteFile(filepath.Join(manifests, "static.yaml"), []byte(staticManifest("critical", c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	startAgent(t, node, append(podArgs(t, c, manifests), "--eviction-hard=memory.available<1000Ti")...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	createHostPod(ctx, t, admin, c, node, evictable, sleeper)

	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "MemoryPressure True from the eviction manager", func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeMemoryPressure {
				return c.Status == corev1.ConditionTrue && c.Reason == "KubeletHasInsufficientMemory"
			}
		}
		return false
	})
	var got *corev1.Pod
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the API pod Failed with reason Evicted", func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, evictable, metav1.GetOptions{})
		got = p
		return err == nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted"
	})
	if got.Status.Message == "" {
		t.Errorf("evicted pod has no message: %+v", got.Status)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the evicted pod stopped in containerd", func() bool {
		return !runningContainer(rt, evictable)
	})
	if !runningContainer(rt, "critical-"+node) {
		t.Errorf("the static pod (critical) is not running under pressure")
	}
	if err := os.Remove(filepath.Join(manifests, "static.yaml")); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, evictable, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty", func() bool { return runtimeEmpty(rt) })
}

// createHostPod creates the default namespace's host-network busybox pod
// name on node, running command with grace 0, and deletes it (grace 0) at
// the test's end.
func createHostPod(ctx context.Context, t *testing.T, admin kubernetes.Interface, c *containerdtest.Containerd, node, name, command string) {
	t.Helper()
	zero := int64(0)
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	if _, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "app", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", command}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Pods over their local storage limits are evicted, with kubelet's
// messages, while the node is under no pressure: one whose container
// writes 4 MiB of logs against an ephemeral-storage limit of 1Mi, one that
// writes 4 MiB into an emptyDir with a sizeLimit of 1Mi. A pod within its
// limits runs on. On containerd 1.x and 2.
func TestAgentEvictsOverLocalStorageLimitsOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	onBothRuntimes(t, func(t *testing.T, c *containerdtest.Containerd, suffix string) {
		evictsOverLocalStorageLimits(t, cp, c, suffix)
	})
}

func evictsOverLocalStorageLimits(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	node := "e2e-local-storage" + suffix
	startAgent(t, node, podArgs(t, c, t.TempDir())...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	const write4MiB = "head -c 4194304 /dev/zero | tr '\\0' x | fold -w 1000"
	limit := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}}
	}
	oneMi := resource.MustParse("1Mi")
	pods := []*corev1.Pod{
		faultPod(node, "log-over"+suffix, c.BusyboxImage),
		faultPod(node, "dir-over"+suffix, c.BusyboxImage),
		faultPod(node, "within"+suffix, c.BusyboxImage),
	}
	pods[0].Spec.Containers[0].Resources = limit("1Mi")
	pods[0].Spec.Containers[0].Command = []string{"sh", "-c", write4MiB + "; " + sleeper}
	pods[1].Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &oneMi}}}}
	pods[1].Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	pods[1].Spec.Containers[0].Command = []string{"sh", "-c", write4MiB + " > /scratch/data; " + sleeper}
	pods[2].Spec.Containers[0].Resources = limit("100Mi")
	pods[2].Spec.Containers[0].Command = []string{"sh", "-c", "echo small; " + sleeper}
	zero := int64(0)
	for _, p := range pods {
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	want := map[string]string{
		"log-over" + suffix: "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ",
		"dir-over" + suffix: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `,
	}
	for name, msg := range want {
		testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, name+" Failed, Evicted: "+msg, func() bool {
			p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" && p.Status.Message == msg
		})
		testenv.Eventually(t, time.Minute, 100*time.Millisecond, name+" stopped in containerd", func() bool {
			return !runningContainer(rt, name)
		})
	}
	if !runningReady(ctx, admin, node, []string{"within" + suffix}) || !runningContainer(rt, "within"+suffix) {
		t.Errorf("the pod within its limits does not run")
	}
	for _, p := range pods {
		if err := admin.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty", func() bool { return runtimeEmpty(rt) })
}
