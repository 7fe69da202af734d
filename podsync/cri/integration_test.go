package cri

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
)

// The tests below run the whole pod half (podsource → podsync.Engine on CRI with
// probes → status.Writer) as system:node:<name> under NodeRestriction, on
// the test control plane and the real containerd.

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// deleteAndWaitGone deletes the pod as an admin with the grace given and
// waits until the writer's final DELETE removed it and containerd is empty.
func (h *podHalf) deleteAndWaitGone(pod *corev1.Pod, grace int64) {
	h.t.Helper()
	if err := h.admin.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		h.t.Fatal(err)
	}
	h.waitPod(pod.Namespace, pod.Name, "pod gone", 60*time.Second, func(_ *corev1.Pod, deleted bool) bool { return deleted })
	testenv.Eventually(h.t, 30*time.Second, 50*time.Millisecond, "containerd empty", h.runtimeEmpty)
}

func TestIntegrationPodReadyHTTP(t *testing.T) {
	h := startPodHalf(t, "podsync-ready", podHalfOptions{})
	port := freePort(t)
	pod := h.pod("web", fmt.Sprintf("mkdir -p /tmp/www && echo ok > /tmp/www/index.html && "+
		"trap 'exit 0' TERM; httpd -f -p 127.0.0.1:%d -h /tmp/www & wait", port))
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/", Port: intstr.FromInt(port)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	h.create(pod)
	p := h.waitPod("default", "web", "Running and Ready", 60*time.Second, func(p *corev1.Pod, _ bool) bool { return podReady(p) })
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || !cs[0].Ready || cs[0].State.Running == nil || p.Status.PodIP != "127.0.0.1" || p.Status.HostIP != "127.0.0.1" {
		t.Errorf("status %s, podIP %q, hostIP %q", describePod(p), p.Status.PodIP, p.Status.HostIP)
	}
	h.deleteAndWaitGone(p, 0)
}

func TestIntegrationLivenessRestart(t *testing.T) {
	h := startPodHalf(t, "podsync-liveness", podHalfOptions{crashLoopInitial: time.Second})
	// Healthy for 1s after each start, then the probe fails.
	pod := h.pod("flaky", "touch /tmp/healthy; (sleep 1; rm /tmp/healthy) & trap 'exit 0' TERM; sleep 3600 & wait")
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/healthy"}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	h.create(pod)
	p := h.waitPod("default", "flaky", "restartCount 2", 90*time.Second, func(p *corev1.Pod, _ bool) bool {
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil {
		t.Errorf("no last termination state: %s", describePod(p))
	}
	h.deleteAndWaitGone(p, 0)
}

func TestIntegrationGracefulDelete(t *testing.T) {
	h := startPodHalf(t, "podsync-graceful", podHalfOptions{})
	pod := h.pod("graceful", "trap 'exit 0' TERM; sleep 3600 & wait")
	h.create(pod)
	p := h.waitPod("default", "graceful", "Running", 60*time.Second, func(p *corev1.Pod, _ bool) bool { return podReady(p) })
	uid := p.UID
	if err := h.admin.CoreV1().Pods("default").Delete(context.Background(), "graceful",
		metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(30))}); err != nil {
		t.Fatal(err)
	}
	var terminal *corev1.Pod
	start := time.Now()
	h.waitPod("default", "graceful", "terminal status, then gone", 60*time.Second, func(p *corev1.Pod, deleted bool) bool {
		if p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && terminal == nil {
			terminal = p.DeepCopy()
		}
		return deleted
	})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("deletion took %v: the container's TERM handler should end it well within the 30s grace", took)
	}
	if terminal == nil {
		t.Fatal("no terminal phase seen before the pod was deleted")
	}
	if cs := terminal.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("terminal status %s", describePod(terminal))
	}
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "containerd empty", h.runtimeEmpty)
	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "pod forgotten", func() bool {
		_, ok := h.eng.PodLifecycle(uid)
		return !ok
	})
}

func TestIntegrationStaticPodMirror(t *testing.T) {
	h := startPodHalf(t, "podsync-static", podHalfOptions{})
	h.writeStatic("static.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: static
  namespace: default
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`, h.c.BusyboxImage))
	name := "static-" + h.node
	p := h.waitPod("default", name, "mirror pod Running", 60*time.Second, func(p *corev1.Pod, _ bool) bool {
		return p != nil && podsource.IsMirrorPod(p) && podReady(p)
	})
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil {
		t.Errorf("mirror pod status %s", describePod(p))
	}
	h.removeStatic("static.yaml")
	h.waitPod("default", name, "mirror pod deleted", 60*time.Second, func(_ *corev1.Pod, deleted bool) bool { return deleted })
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "containerd empty", h.runtimeEmpty)
}

func ptr[T any](v T) *T { return &v }
