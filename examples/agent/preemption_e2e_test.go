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

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// On the fake runtime, a node whose --max-pods is taken by two API pods
// admits a static pod by preempting the best-effort one, as kubelet does:
// the victim's API status becomes Failed with reason Preempting and the
// DisruptionTarget condition, the burstable pod keeps running and the
// static pod's mirror pod shows it Running.
func TestAgentPreemptsForStaticPodOnFakeRuntime(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := cp.AdminClient()
	const node = "e2e-preempt"
	manifests := t.TempDir()
	p := startAgent(t, node, "--max-pods=2", "--pod-manifest-path="+manifests, "--file-check-frequency=1s",
		"--root-dir="+t.TempDir(), "--pod-log-root="+t.TempDir(), "--resolv-conf=")
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	zero := int64(0)
	for _, name := range []string{"besteffort", "burstable"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &zero,
				Containers: []corev1.Container{{Name: "app", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent}}},
		}
		if name == "burstable" {
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	phase := func(name string) (*corev1.Pod, bool) {
		got, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return got, err == nil
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "both API pods Running", func() bool {
		a, ok1 := phase("besteffort")
		b, ok2 := phase("burstable")
		return ok1 && ok2 && a.Status.Phase == corev1.PodRunning && b.Status.Phase == corev1.PodRunning
	})

	if err := os.WriteFile(filepath.Join(manifests, "critical.yaml"), []byte(fakeManifest("critical")), 0o644); err != nil {
		t.Fatal(err)
	}
	var victim *corev1.Pod
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the best-effort pod Failed with reason Preempting", func() bool {
		got, ok := phase("besteffort")
		victim = got
		return ok && got.Status.Phase == corev1.PodFailed && got.Status.Reason == "Preempting"
	})
	if victim.Status.Message != "Preempted in order to admit critical pod" {
		t.Errorf("victim message %q", victim.Status.Message)
	}
	disrupted := false
	for _, c := range victim.Status.Conditions {
		disrupted = disrupted || (c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet")
	}
	if !disrupted {
		t.Errorf("victim conditions %+v", victim.Status.Conditions)
	}
	mirror := "critical-" + node
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the static pod's mirror pod Running", func() bool {
		got, ok := phase(mirror)
		return ok && got.Status.Phase == corev1.PodRunning
	})
	if got, _ := phase("burstable"); got.Status.Phase != corev1.PodRunning {
		t.Errorf("the burstable pod was not spared: %+v", got.Status)
	}
	if m := metricValue(p.get(t, "/metrics"), `kubelet_preemptions{preemption_signal="pods"}`); m != 1 {
		t.Errorf("kubelet_preemptions{preemption_signal=\"pods\"} = %v, want 1", m)
	}
	if err := os.Remove(filepath.Join(manifests, "critical.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the mirror pod gone", func() bool {
		_, ok := phase(mirror)
		return !ok
	})
	p.stop(t)
}

// On containerd, with --max-pods=1: the static pod preempts the API pod,
// whose container is stopped and whose API status is Failed/Preempting,
// and then runs.
func TestAgentPreemptsForStaticPodOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	const node = "e2e-preempt-ctrd"
	manifests := t.TempDir()
	p := startAgent(t, node, append(podArgs(t, c, manifests), "--max-pods=1")...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	createHostPod(ctx, t, admin, c, node, "victim", sleeper)
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the API pod running in containerd", func() bool {
		return runningContainer(rt, "victim")
	})

	if err := os.WriteFile(filepath.Join(manifests, "critical.yaml"), []byte(staticManifest("critical", c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the API pod Failed with reason Preempting", func() bool {
		got, err := admin.CoreV1().Pods("default").Get(ctx, "victim", metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodFailed && got.Status.Reason == "Preempting"
	})
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the static pod running, the API pod stopped", func() bool {
		return runningContainer(rt, "critical-"+node) && !runningContainer(rt, "victim")
	})
	if err := os.Remove(filepath.Join(manifests, "critical.yaml")); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := admin.CoreV1().Pods("default").Delete(ctx, "victim", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty", func() bool { return runtimeEmpty(rt) })
	p.stop(t)
}
