package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// The agent as a user meets it, on both runtimes: a pod asking for an
// unsafe sysctl is rejected at admission (Failed, SysctlForbidden), a pod
// past its activeDeadlineSeconds is Failed with DeadlineExceeded and its
// container stopped, and a pod running as uid 1000 gets the group and
// supplementary group it asked for (the container prints id).
func TestAgentPodSecurityAndDeadline(t *testing.T) {
	cp := controlplane.Need(t, cp)
	t.Run("containerd1", func(t *testing.T) { agentPodSecurity(t, cp, containerdtest.Need(t, ctrd), "") })
	t.Run("containerd2", func(t *testing.T) { agentPodSecurity(t, cp, containerdtest.Need2(t, ctrd2), "2") })
}

func agentPodSecurity(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	node := "e2e-security" + suffix
	p := startAgent(t, node, podArgs(t, c, t.TempDir())...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	pod := func(name string, restart corev1.RestartPolicy, command string, mod func(*corev1.PodSpec)) *corev1.Pod {
		grace := int64(1)
		pd := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + suffix, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, DNSPolicy: corev1.DNSDefault, RestartPolicy: restart,
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "app", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"sh", "-c", command}}}},
		}
		mod(&pd.Spec)
		created, err := admin.CoreV1().Pods("default").Create(ctx, pd, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), created.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		return created
	}
	sysctl := pod("sysctl", corev1.RestartPolicyAlways, sleeper, func(s *corev1.PodSpec) {
		s.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "8192"}}}
	})
	deadline := pod("deadline", corev1.RestartPolicyAlways, sleeper, func(s *corev1.PodSpec) {
		d := int64(3)
		s.ActiveDeadlineSeconds = &d
	})
	ids := pod("ids", corev1.RestartPolicyNever, "id > /dev/termination-log", func(s *corev1.PodSpec) {
		u, g := int64(1000), int64(3000)
		s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &u, RunAsGroup: &g, SupplementalGroups: []int64{2000}}
	})

	get := func(pd *corev1.Pod) *corev1.Pod {
		got, err := admin.CoreV1().Pods("default").Get(ctx, pd.Name, metav1.GetOptions{})
		if err != nil {
			return &corev1.Pod{}
		}
		return got
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the sysctl pod rejected", func() bool {
		s := get(sysctl).Status
		return s.Phase == corev1.PodFailed && s.Reason == "SysctlForbidden"
	})
	if msg := get(sysctl).Status.Message; !strings.Contains(msg, "kernel.msgmax") {
		t.Errorf("sysctl rejection %q does not name the sysctl", msg)
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the deadline pod Failed, DeadlineExceeded, its container stopped", func() bool {
		s := get(deadline).Status
		return s.Phase == corev1.PodFailed && s.Reason == "DeadlineExceeded" && len(s.ContainerStatuses) == 1 &&
			s.ContainerStatuses[0].State.Terminated != nil && !runningContainer(rt, deadline.Name)
	})
	var msg string
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the ids pod Succeeded", func() bool {
		s := get(ids).Status
		if s.Phase != corev1.PodSucceeded || len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Terminated == nil {
			return false
		}
		msg = s.ContainerStatuses[0].State.Terminated.Message
		return true
	})
	if !strings.Contains(msg, "uid=1000") || !strings.Contains(msg, "gid=3000") || !strings.Contains(msg, "2000") {
		t.Errorf("id printed %q, want uid 1000, gid 3000 and group 2000", msg)
	}

	zero := int64(0)
	for _, pd := range []*corev1.Pod{sysctl, deadline, ids} {
		if err := admin.CoreV1().Pods("default").Delete(ctx, pd.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty after the pods were deleted", func() bool {
		return runtimeEmpty(rt)
	})
	p.stop(t)
}
