package probe_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/remote"
)

var ctrd *containerdtest.Containerd

func TestMain(m *testing.M) { os.Exit(containerdtest.Main(m, &ctrd)) }

// TestExecOnContainerd runs exec probes through nodekit's CRI client in a
// busybox container on a real containerd: success, failure with output, a
// command that outlives its timeout, and a manager whose liveness probe
// notices a file going away.
func TestExecOnContainerd(t *testing.T) {
	c := containerdtest.Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt, err := remote.Dial(ctx, remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	const uid = "probe-e2e-0001"
	sbConfig := c.SandboxConfig("probe-e2e", "default", uid)
	sandboxID, err := rt.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := rt.RemovePodSandbox(cctx, sandboxID); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	}()
	ctrConfig := c.BusyboxContainer("app", "sh", "-c", "touch /tmp/healthy && exec sleep 3600")
	id, err := rt.CreateContainer(ctx, sandboxID, ctrConfig, sbConfig)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	h, err := probe.NewHandlers(probe.HandlerOptions{Execer: rt})
	if err != nil {
		t.Fatal(err)
	}
	target := probe.Target{ContainerID: "containerd://" + id}
	exec := func(timeout int32, cmd ...string) *corev1.Probe {
		return &corev1.Probe{TimeoutSeconds: timeout, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}
	}
	// The container's command may not have created the file yet.
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the healthy file to appear", func() bool {
		return h.Probe(ctx, exec(5, "cat", "/tmp/healthy"), target).Result == probe.Success
	})
	if out := h.Probe(ctx, exec(5, "sh", "-c", "echo out; echo err >&2; exit 3"), target); out.Result != probe.Failure || out.Message != "out\nerr\n" {
		t.Errorf("failing command: %+v", out)
	}
	start := time.Now()
	out := h.Probe(ctx, exec(1, "sleep", "30"), target)
	if took := time.Since(start); out.Result != probe.Failure || !strings.Contains(out.Message, "timed out") || took > 5*time.Second {
		t.Errorf("slow command: %+v after %v", out, took)
	}
	if out := h.Probe(ctx, exec(5, "true"), probe.Target{ContainerID: "no-such-container"}); out.Err == nil {
		t.Errorf("missing container: %+v", out)
	}

	// The manager, driven by a fake clock, probing the real container.
	clk := testclock.NewFakeClock(time.Now())
	m, err := probe.New(probe.Options{Prober: h, Clock: clk, NoStartJitter: true})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-e2e", Namespace: "default", UID: uid},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:          "app",
			LivenessProbe: &corev1.Probe{FailureThreshold: 2, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/healthy"}}}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://" + id,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}},
		}}},
	}
	m.AddPod(pod)
	updates := m.Subscribe(ctx, 10)
	step := func() {
		t.Helper()
		if _, err := m.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Step(10 * time.Second)
	}
	step()
	if u := <-updates; u.Result != probe.Success {
		t.Fatalf("initial: %+v", u)
	}
	if r, _ := m.Result(uid, "app", probe.Liveness); r != probe.Success {
		t.Fatalf("liveness %v", r)
	}
	if _, err := rt.ExecSync(ctx, id, []string{"rm", "/tmp/healthy"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	step() // one failure of two
	if r, _ := m.Result(uid, "app", probe.Liveness); r != probe.Success {
		t.Fatalf("liveness %v after one failure", r)
	}
	step()
	u := <-updates
	if u.Result != probe.Failure || u.ContainerID != "containerd://"+id {
		t.Fatalf("after two failures: %+v", u)
	}
	m.RemovePod(uid)
	if n := m.WorkerCount(); n != 0 {
		t.Errorf("%d workers", n)
	}
}
