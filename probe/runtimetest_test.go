package probe_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestExecOnRuntimeFake runs exec probes through the runtime fake.
func TestExecOnRuntimeFake(t *testing.T) {
	ctx := context.Background()
	f := runtimetest.New(runtimetest.Options{})
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}}
	sandboxID, err := f.RunPodSandbox(ctx, sb, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage},
	}, sb)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	f.ScriptExec(id, []string{"check"}, runtimetest.ExecScript{Stdout: "fine"})
	f.ScriptExec(id, []string{"bad"}, runtimetest.ExecScript{Stderr: "broken", ExitCode: 1})
	f.ScriptExec(id, []string{"slow"}, runtimetest.ExecScript{Timeout: true})

	h, err := probe.NewHandlers(probe.HandlerOptions{Execer: f})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(cmd string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}}
	}
	target := probe.Target{ContainerID: "containerd://" + id}
	for _, tc := range []struct {
		cmd  string
		want probe.Result
		msg  string
	}{
		{"check", probe.Success, "fine"},
		{"bad", probe.Failure, "broken"},
		{"slow", probe.Failure, "timed out"},
	} {
		if out := h.Probe(ctx, spec(tc.cmd), target); out.Result != tc.want || !strings.Contains(out.Message, tc.msg) || out.Err != nil {
			t.Errorf("%s: %+v", tc.cmd, out)
		}
	}
	if err := f.Exit(id, 0); err != nil {
		t.Fatal(err)
	}
	if out := h.Probe(ctx, spec("check"), target); out.Err == nil || out.Result != probe.Unknown {
		t.Errorf("exited container: %+v", out)
	}
}
