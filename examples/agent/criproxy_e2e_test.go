package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/criproxy"
	"github.com/nodekit/nodekit/internal/testenv"
)

const (
	criRunPodSandbox   = "/runtime.v1.RuntimeService/RunPodSandbox"
	criCreateContainer = "/runtime.v1.RuntimeService/CreateContainer"
	criPullImage       = "/runtime.v1.ImageService/PullImage"
)

// A failing and slow runtime: between the agent and containerd a proxy
// fails every other RunPodSandbox, makes the first CreateContainer hang
// past the agent's request timeout, and fails every PullImage. Every pod
// that needs no pull still runs, the others are not held up by the hung
// call, the pod whose image cannot be pulled waits with kubelet's reason
// and is retried with back-off, and no call is retried in a hot loop.
func TestAgentOnFailingRuntime(t *testing.T) {
	cp := controlplane.Need(t, cp)
	onBothRuntimes(t, func(t *testing.T, c *containerdtest.Containerd, suffix string) { failingRuntime(t, cp, c, suffix) })
}

func failingRuntime(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()

	proxy, err := criproxy.Start(filepath.Join(t.TempDir(), "cri.sock"), c.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	injected := status.Error(codes.Unavailable, "injected by the test's proxy")
	proxy.SetFault(criRunPodSandbox, func(_ context.Context, n int) error {
		if n%2 == 1 {
			return injected
		}
		return nil
	})
	proxy.SetFault(criCreateContainer, func(ctx context.Context, n int) error {
		if n == 1 {
			<-ctx.Done() // the agent's request timeout ends it
			return ctx.Err()
		}
		return nil
	})
	proxy.SetFault(criPullImage, func(context.Context, int) error {
		return status.Error(codes.NotFound, "injected: no such image in the test's proxy")
	})

	node := "e2e-faulty-cri" + suffix
	args := podArgs(t, c, t.TempDir())
	for i, a := range args {
		if strings.HasPrefix(a, "--container-runtime-endpoint=") {
			args[i] = "--container-runtime-endpoint=" + proxy.Endpoint
		}
	}
	args = append(args, "--runtime-request-timeout=10s")
	p := startAgent(t, node, args...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	created := time.Now()
	names := createPods(ctx, t, admin, c, node, "faulty"+suffix, 3)
	pull := faultPod(node, "faulty-pull"+suffix, c.BusyboxImage)
	pull.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pull, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods("default").Delete(context.Background(), pull.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})

	running := func(name string) bool {
		got, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodRunning
	}
	// While one CreateContainer hangs (up to the agent's request timeout,
	// 10s here), the other pods start.
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "two pods Running beside the hung call", func() bool {
		n := 0
		for _, name := range names {
			if running(name) {
				n++
			}
		}
		return n >= 2
	})
	others := time.Since(created)
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "all three pods Running", func() bool {
		for _, name := range names {
			if !running(name) {
				return false
			}
		}
		return true
	})
	t.Logf("two pods Running %v after creation, all three after %v", others.Round(time.Millisecond), time.Since(created).Round(time.Millisecond))

	// The pod whose image cannot be pulled waits with kubelet's reason.
	reason := func() string {
		got, err := admin.CoreV1().Pods("default").Get(ctx, "faulty-pull"+suffix, metav1.GetOptions{})
		if err != nil || len(got.Status.ContainerStatuses) == 0 || got.Status.ContainerStatuses[0].State.Waiting == nil {
			return ""
		}
		w := got.Status.ContainerStatuses[0].State.Waiting
		return w.Reason + ": " + w.Message
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the pull's failure in the pod's status", func() bool {
		r := reason()
		return strings.HasPrefix(r, "ErrImagePull") || strings.HasPrefix(r, "ImagePullBackOff")
	})
	t.Logf("pod faulty-pull: %s", reason())
	// Between pulls the pod waits with ImagePullBackOff: the pull back-off
	// (10s, doubling), not only the pod's retry after an error (also 10s),
	// spaces the pulls.
	testenv.Eventually(t, 45*time.Second, 100*time.Millisecond, "the pod waiting with ImagePullBackOff between pulls", func() bool {
		return strings.HasPrefix(reason(), "ImagePullBackOff")
	})

	// Back-off, not a hot loop: over 15 s the failing pull is tried at most
	// twice (kubelet's image back-off starts at 10 s and doubles), and the
	// sandboxes were asked for at most twice per pod, plus retries after
	// the hung call.
	pulls := proxy.Calls(criPullImage)
	waitFor(ctx, 15*time.Second)
	if n := proxy.Calls(criPullImage) - pulls; n > 2 {
		t.Errorf("%d PullImage calls in 15s after the first failures, want at most 2 (back-off)", n)
	}
	if n := proxy.Calls(criRunPodSandbox); n > 2*4+2 {
		t.Errorf("%d RunPodSandbox calls for 4 pods with every other one failing", n)
	}
	if !running(names[0]) || !running(names[1]) || !running(names[2]) {
		t.Errorf("a pod stopped running while the pull kept failing")
	}
	t.Logf("calls through the proxy: RunPodSandbox %d, CreateContainer %d, PullImage %d",
		proxy.Calls(criRunPodSandbox), proxy.Calls(criCreateContainer), proxy.Calls(criPullImage))

	for _, name := range append(names, "faulty-pull"+suffix) {
		_ = admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "containerd empty after the pods were deleted", func() bool {
		return runtimeEmpty(rt)
	})
	p.stop(t)
}
