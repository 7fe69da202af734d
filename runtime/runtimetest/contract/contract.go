package contract

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// Target is a runtime under the contract suite and what the suite
// needs to know about it.
type Target struct {
	// Runtime is the runtime under test.
	Runtime runtime.Runtime
	// PauseImage is an image present in the runtime (the sandbox image).
	PauseImage string
	// BusyboxImage is an image present in the runtime with /bin/sh, sleep
	// and echo.
	BusyboxImage string
	// Fake, when Runtime is (or is backed by) a fake, lets the suite script
	// the commands it runs and make containers exit, since nothing runs in a
	// fake. Nil for a real runtime, where the suite also checks wall-clock
	// behaviour (a stop grace period that is waited out).
	Fake *runtimetest.Runtime
	// SandboxConfig, if set, adjusts each sandbox config the suite builds
	// (host network, empty hostname), for example to set a cgroup parent or a
	// log directory.
	SandboxConfig func(*runtimeapi.PodSandboxConfig)
	// RuntimeHandler is passed to RunPodSandbox. Default "" (the runtime's).
	RuntimeHandler string
	// Timeout bounds each case. Default 2m.
	Timeout time.Duration
}

// Run runs the contract suite on the runtime newTarget returns. It
// calls newTarget once per case; a case removes what it created. The cases
// are lifecycles of sandboxes and containers with their states, list filters,
// ExecSync (success, non-zero exit, timeout), the streaming URLs of Exec,
// Attach and PortForward (on a fake, after SetStreamURL), a stop whose SIGTERM is
// ignored, removal of running things, idempotent stop and remove, and
// NotFound for missing objects, container and sandbox stats, and container
// events (created, started, stopped and deleted, with the sandbox's and
// containers' statuses). A method that the runtime answers with
// Unimplemented (container events and metrics on containerd 1.6) is a skip.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	cases := []struct {
		name string
		fn   func(*suite)
	}{
		{"Version", (*suite).version},
		{"Status", (*suite).status},
		{"Images", (*suite).images},
		{"SandboxLifecycle", (*suite).sandboxLifecycle},
		{"ContainerLifecycle", (*suite).containerLifecycle},
		{"ContainerExitCode", (*suite).containerExitCode},
		{"ListFilters", (*suite).listFilters},
		{"ExecSync", (*suite).execSync},
		{"ExecNonZeroExit", (*suite).execNonZeroExit},
		{"ExecTimeout", (*suite).execTimeout},
		{"ExecNotRunning", (*suite).execNotRunning},
		{"Streaming", (*suite).streaming},
		{"StopTimeoutIgnoredSIGTERM", (*suite).stopTimeout},
		{"RemoveRunning", (*suite).removeRunning},
		{"IdempotentStopRemove", (*suite).idempotent},
		{"NotFound", (*suite).notFound},
		{"UpdateRuntimeConfig", (*suite).updateRuntimeConfig},
		{"UpdateContainerResources", (*suite).updateContainerResources},
		{"ReopenContainerLog", (*suite).reopenContainerLog},
		{"ContainerEvents", (*suite).containerEvents},
		{"PodSandboxMetrics", (*suite).podSandboxMetrics},
		{"ContainerStats", (*suite).containerStats},
		{"PodSandboxStats", (*suite).podSandboxStats},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := newTarget(t)
			if target.Runtime == nil || target.PauseImage == "" || target.BusyboxImage == "" {
				t.Fatal("Target needs Runtime, PauseImage and BusyboxImage")
			}
			if target.Timeout <= 0 {
				target.Timeout = 2 * time.Minute
			}
			ctx, cancel := context.WithTimeout(context.Background(), target.Timeout)
			defer cancel()
			var run [6]byte
			_, _ = rand.Read(run[:])
			s := &suite{t: t, ctx: ctx, target: target, rt: target.Runtime, run: hex.EncodeToString(run[:]), wall: clock.RealClock{}}
			c.fn(s)
		})
	}
}

// runLabel marks every object one case creates.
const runLabel = "test.nodekit.io/run"

type suite struct {
	t      *testing.T
	ctx    context.Context
	target Target
	rt     runtime.Runtime
	run    string // unique per case
	n      int
	wall   clock.Clock // measures a real runtime's timing
}

func (s *suite) real() bool { return s.target.Fake == nil }

func (s *suite) sandboxConfig(name string, labels map[string]string) *runtimeapi.PodSandboxConfig {
	s.n++
	l := map[string]string{runLabel: s.run}
	for k, v := range labels {
		l[k] = v
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      fmt.Sprintf("%s-%s-%d", name, s.run, s.n),
			Namespace: "contract",
			Uid:       fmt.Sprintf("uid-%s-%d", s.run, s.n),
		},
		Hostname: "",
		Labels:   l,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_NODE,
					Pid:     runtimeapi.NamespaceMode_CONTAINER,
					Ipc:     runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
	if s.target.SandboxConfig != nil {
		s.target.SandboxConfig(cfg)
	}
	return cfg
}

// sandbox runs a sandbox and removes it when the case ends.
func (s *suite) sandbox(name string, labels map[string]string) (string, *runtimeapi.PodSandboxConfig) {
	s.t.Helper()
	cfg := s.sandboxConfig(name, labels)
	id, err := s.rt.RunPodSandbox(s.ctx, cfg, s.target.RuntimeHandler)
	if err != nil {
		s.t.Fatalf("RunPodSandbox: %v", err)
	}
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.rt.RemovePodSandbox(ctx, id); err != nil {
			s.t.Errorf("cleanup: RemovePodSandbox(%s): %v", id, err)
		}
	})
	return id, cfg
}

// shell is the command a container runs: sh -c script.
func shell(script string) []string { return []string{"sh", "-c", script} }

// sleeper exits 0 at once on SIGTERM.
const sleeper = `trap "exit 0" TERM; sleep 3600 & wait`

func (s *suite) container(sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, name string, cmd []string, labels map[string]string) string {
	s.t.Helper()
	l := map[string]string{runLabel: s.run}
	for k, v := range labels {
		l[k] = v
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: s.target.BusyboxImage},
		Command:  cmd,
		Labels:   l,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions(),
			},
		},
	}
	id, err := s.rt.CreateContainer(s.ctx, sandboxID, cfg, sbCfg)
	if err != nil {
		s.t.Fatalf("CreateContainer(%s): %v", name, err)
	}
	return id
}

func (s *suite) start(id string) {
	s.t.Helper()
	if err := s.rt.StartContainer(s.ctx, id); err != nil {
		s.t.Fatalf("StartContainer: %v", err)
	}
}

func (s *suite) containerStatus(id string) *runtimeapi.ContainerStatus {
	s.t.Helper()
	resp, err := s.rt.ContainerStatus(s.ctx, id, false)
	if err != nil {
		s.t.Fatalf("ContainerStatus: %v", err)
	}
	if resp.GetStatus() == nil {
		s.t.Fatal("ContainerStatus: no status")
	}
	return resp.Status
}

func (s *suite) sandboxStatus(id string) *runtimeapi.PodSandboxStatus {
	s.t.Helper()
	resp, err := s.rt.PodSandboxStatus(s.ctx, id, false)
	if err != nil {
		s.t.Fatalf("PodSandboxStatus: %v", err)
	}
	if resp.GetStatus() == nil {
		s.t.Fatal("PodSandboxStatus: no status")
	}
	return resp.Status
}

// waitState polls until the container is in state, within 30s.
func (s *suite) waitState(id string, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	s.t.Helper()
	deadline := s.wall.Now().Add(30 * time.Second)
	for {
		st := s.containerStatus(id)
		if st.State == state {
			return st
		}
		if s.wall.Now().After(deadline) {
			s.t.Fatalf("container %s is %v after 30s, want %v", id, st.State, state)
		}
		select {
		case <-s.ctx.Done():
			s.t.Fatalf("container %s is %v, want %v: %v", id, st.State, state, s.ctx.Err())
		case <-s.wall.After(20 * time.Millisecond):
		}
	}
}

func (s *suite) script(containerID string, cmd []string, sc runtimetest.ExecScript) {
	if s.target.Fake != nil {
		s.target.Fake.ScriptExec(containerID, cmd, sc)
	}
}

// runningContainer makes a sandbox with one running sleeper container.
func (s *suite) runningContainer() (sandboxID, containerID string) {
	s.t.Helper()
	sb, cfg := s.sandbox("pod", nil)
	id := s.container(sb, cfg, "main", shell(sleeper), nil)
	s.start(id)
	s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	return sb, id
}

func (s *suite) version() {
	v, err := s.rt.Version(s.ctx)
	if err != nil {
		s.t.Fatalf("Version: %v", err)
	}
	if v.RuntimeName == "" || v.RuntimeVersion == "" {
		s.t.Errorf("Version = %v, want runtime name and version", v)
	}
	if v.RuntimeApiVersion != "v1" {
		s.t.Errorf("RuntimeApiVersion = %q, want v1", v.RuntimeApiVersion)
	}
}

func (s *suite) status() {
	resp, err := s.rt.Status(s.ctx, false)
	if err != nil {
		s.t.Fatalf("Status: %v", err)
	}
	var runtimeReady, networkSeen bool
	for _, c := range resp.GetStatus().GetConditions() {
		switch c.Type {
		case runtimeapi.RuntimeReady:
			runtimeReady = c.Status
		case runtimeapi.NetworkReady:
			networkSeen = true
		}
	}
	if !runtimeReady {
		s.t.Errorf("Status conditions %v: want RuntimeReady true", resp.GetStatus().GetConditions())
	}
	if !networkSeen {
		s.t.Errorf("Status conditions %v: want a NetworkReady condition", resp.GetStatus().GetConditions())
	}
}

func (s *suite) images() {
	imgs, err := s.rt.ListImages(s.ctx, nil)
	if err != nil {
		s.t.Fatalf("ListImages: %v", err)
	}
	for _, want := range []string{s.target.PauseImage, s.target.BusyboxImage} {
		if !slices.ContainsFunc(imgs, func(img *runtimeapi.Image) bool { return slices.Contains(img.RepoTags, want) }) {
			s.t.Errorf("ListImages: %s is missing", want)
		}
		st, err := s.rt.ImageStatus(s.ctx, &runtimeapi.ImageSpec{Image: want}, false)
		if err != nil {
			s.t.Fatalf("ImageStatus(%s): %v", want, err)
		}
		if st.GetImage().GetId() == "" || st.GetImage().GetSize() == 0 {
			s.t.Errorf("ImageStatus(%s) = %v, want an ID and a size", want, st.GetImage())
		}
	}
	st, err := s.rt.ImageStatus(s.ctx, &runtimeapi.ImageSpec{Image: "example.invalid/missing:" + s.run}, false)
	if err != nil {
		s.t.Fatalf("ImageStatus(missing): %v", err)
	}
	if st.GetImage() != nil {
		s.t.Errorf("ImageStatus(missing) = %v, want nil image", st.GetImage())
	}
	if err := s.rt.RemoveImage(s.ctx, &runtimeapi.ImageSpec{Image: "example.invalid/missing:" + s.run}); err != nil {
		s.t.Errorf("RemoveImage(missing): %v, want nil", err)
	}
	if _, err := s.rt.ImageFsInfo(s.ctx); err != nil {
		s.t.Errorf("ImageFsInfo: %v", err)
	}
}

func (s *suite) sandboxLifecycle() {
	id, cfg := s.sandbox("pod", map[string]string{"app": "lifecycle"})
	st := s.sandboxStatus(id)
	if st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		s.t.Errorf("state after RunPodSandbox = %v, want SANDBOX_READY", st.State)
	}
	if st.Id != id || st.CreatedAt == 0 {
		s.t.Errorf("status id %q createdAt %d, want %q and a creation time", st.Id, st.CreatedAt, id)
	}
	if st.GetMetadata().GetName() != cfg.Metadata.Name || st.GetMetadata().GetUid() != cfg.Metadata.Uid {
		s.t.Errorf("status metadata %v, want %v", st.GetMetadata(), cfg.Metadata)
	}
	if st.Labels["app"] != "lifecycle" {
		s.t.Errorf("status labels %v, want app=lifecycle", st.Labels)
	}
	list, err := s.rt.ListPodSandbox(s.ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runLabel: s.run}})
	if err != nil {
		s.t.Fatalf("ListPodSandbox: %v", err)
	}
	if len(list) != 1 || list[0].Id != id || list[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		s.t.Errorf("ListPodSandbox = %v, want the one READY sandbox", list)
	}
	if err := s.rt.StopPodSandbox(s.ctx, id); err != nil {
		s.t.Fatalf("StopPodSandbox: %v", err)
	}
	if st := s.sandboxStatus(id); st.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		s.t.Errorf("state after StopPodSandbox = %v, want SANDBOX_NOTREADY", st.State)
	}
	if err := s.rt.StopPodSandbox(s.ctx, id); err != nil {
		s.t.Errorf("second StopPodSandbox: %v, want nil", err)
	}
	if err := s.rt.RemovePodSandbox(s.ctx, id); err != nil {
		s.t.Fatalf("RemovePodSandbox: %v", err)
	}
	if _, err := s.rt.PodSandboxStatus(s.ctx, id, false); !runtime.IsNotFound(err) {
		s.t.Errorf("PodSandboxStatus after remove: %v, want NotFound", err)
	}
	if err := s.rt.RemovePodSandbox(s.ctx, id); err != nil {
		s.t.Errorf("second RemovePodSandbox: %v, want nil", err)
	}
}

func (s *suite) containerLifecycle() {
	sb, cfg := s.sandbox("pod", nil)
	id := s.container(sb, cfg, "main", shell(sleeper), map[string]string{"role": "main"})
	st := s.containerStatus(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		s.t.Errorf("state after CreateContainer = %v, want CONTAINER_CREATED", st.State)
	}
	if st.CreatedAt == 0 || st.StartedAt != 0 || st.FinishedAt != 0 {
		s.t.Errorf("times after create: created %d started %d finished %d, want created only", st.CreatedAt, st.StartedAt, st.FinishedAt)
	}
	if st.GetMetadata().GetName() != "main" || st.Labels["role"] != "main" || st.GetImage().GetImage() == "" || st.ImageRef == "" {
		s.t.Errorf("status %v: want name main, label role=main, image and image ref", st)
	}
	s.start(id)
	st = s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if st.StartedAt < st.CreatedAt || st.StartedAt == 0 {
		s.t.Errorf("started %d, created %d: want started at or after created", st.StartedAt, st.CreatedAt)
	}
	if err := s.rt.StartContainer(s.ctx, id); err == nil {
		s.t.Errorf("StartContainer of a running container: nil error, want one")
	}
	if err := s.rt.StopContainer(s.ctx, id, 10*time.Second); err != nil {
		s.t.Fatalf("StopContainer: %v", err)
	}
	st = s.containerStatus(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		s.t.Errorf("state after StopContainer = %v, want CONTAINER_EXITED", st.State)
	}
	if st.FinishedAt < st.StartedAt || st.FinishedAt == 0 {
		s.t.Errorf("finished %d, started %d: want finished at or after started", st.FinishedAt, st.StartedAt)
	}
	if err := s.rt.StopContainer(s.ctx, id, time.Second); err != nil {
		s.t.Errorf("second StopContainer: %v, want nil", err)
	}
	if err := s.rt.RemoveContainer(s.ctx, id); err != nil {
		s.t.Fatalf("RemoveContainer: %v", err)
	}
	if _, err := s.rt.ContainerStatus(s.ctx, id, false); !runtime.IsNotFound(err) {
		s.t.Errorf("ContainerStatus after remove: %v, want NotFound", err)
	}
	if err := s.rt.RemoveContainer(s.ctx, id); err != nil {
		s.t.Errorf("second RemoveContainer: %v, want nil", err)
	}
	if s.sandboxStatus(sb).State != runtimeapi.PodSandboxState_SANDBOX_READY {
		s.t.Errorf("sandbox is not READY after its container was removed")
	}
}

func (s *suite) containerExitCode() {
	sb, cfg := s.sandbox("pod", nil)
	id := s.container(sb, cfg, "exits", shell("exit 3"), nil)
	s.start(id)
	if s.target.Fake != nil {
		if err := s.target.Fake.Exit(id, 3); err != nil {
			s.t.Fatalf("Exit: %v", err)
		}
	}
	st := s.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.ExitCode != 3 || st.Reason != "Error" {
		s.t.Errorf("exit code %d reason %q, want 3 and Error", st.ExitCode, st.Reason)
	}
	// containerd 1.6 stamps StartedAt when its start call returns, which for a
	// process that exits at once can be a little after the exit it recorded:
	// only the order against CreatedAt is part of the contract.
	if st.StartedAt == 0 || st.FinishedAt == 0 || st.StartedAt < st.CreatedAt || st.FinishedAt < st.CreatedAt {
		s.t.Errorf("created %d, started %d, finished %d: want started and finished set, not before created", st.CreatedAt, st.StartedAt, st.FinishedAt)
	}
	id0 := s.container(sb, cfg, "completes", shell("exit 0"), nil)
	s.start(id0)
	if s.target.Fake != nil {
		if err := s.target.Fake.Exit(id0, 0); err != nil {
			s.t.Fatalf("Exit: %v", err)
		}
	}
	if st := s.waitState(id0, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 0 || st.Reason != "Completed" {
		s.t.Errorf("exit code %d reason %q, want 0 and Completed", st.ExitCode, st.Reason)
	}
}

func ids[T interface{ GetId() string }](items []T) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.GetId())
	}
	slices.Sort(out)
	return out
}

func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func (s *suite) listFilters() {
	sb1, cfg1 := s.sandbox("one", map[string]string{"pod": "one"})
	sb2, cfg2 := s.sandbox("two", map[string]string{"pod": "two"})
	a := s.container(sb1, cfg1, "a", shell(sleeper), map[string]string{"role": "a"})
	b := s.container(sb1, cfg1, "b", shell(sleeper), map[string]string{"role": "b"})
	c := s.container(sb1, cfg1, "c", shell(sleeper), map[string]string{"role": "c"})
	d := s.container(sb2, cfg2, "d", shell(sleeper), map[string]string{"role": "a"})
	for _, id := range []string{a, b, d} {
		s.start(id)
		s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	}
	run := map[string]string{runLabel: s.run}
	with := func(k, v string) map[string]string { return map[string]string{runLabel: s.run, k: v} }
	state := func(st runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: st}
	}
	ccases := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"all of the run", &runtimeapi.ContainerFilter{LabelSelector: run}, sorted(a, b, c, d)},
		{"label role=a", &runtimeapi.ContainerFilter{LabelSelector: with("role", "a")}, sorted(a, d)},
		{"label role=a in sandbox one", &runtimeapi.ContainerFilter{LabelSelector: with("role", "a"), PodSandboxId: sb1}, sorted(a)},
		{"sandbox one", &runtimeapi.ContainerFilter{PodSandboxId: sb1}, sorted(a, b, c)},
		{"sandbox two", &runtimeapi.ContainerFilter{PodSandboxId: sb2}, sorted(d)},
		{"running", &runtimeapi.ContainerFilter{LabelSelector: run, State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, sorted(a, b, d)},
		{"created", &runtimeapi.ContainerFilter{LabelSelector: run, State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, sorted(c)},
		{"running in sandbox one", &runtimeapi.ContainerFilter{PodSandboxId: sb1, State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, sorted(a, b)},
		{"id", &runtimeapi.ContainerFilter{Id: b}, sorted(b)},
		{"no match", &runtimeapi.ContainerFilter{LabelSelector: with("role", "none")}, []string{}},
	}
	for _, tc := range ccases {
		got, err := s.rt.ListContainers(s.ctx, tc.filter)
		if err != nil {
			s.t.Fatalf("ListContainers(%s): %v", tc.name, err)
		}
		if g := ids(got); !slices.Equal(g, tc.want) {
			s.t.Errorf("ListContainers(%s) = %v, want %v", tc.name, g, tc.want)
		}
		for _, ct := range got {
			if ct.Id == a && (ct.PodSandboxId != sb1 || ct.Metadata.GetName() != "a" || ct.State != runtimeapi.ContainerState_CONTAINER_RUNNING) {
				s.t.Errorf("ListContainers(%s): container a = %v", tc.name, ct)
			}
		}
	}

	if err := s.rt.StopPodSandbox(s.ctx, sb2); err != nil {
		s.t.Fatalf("StopPodSandbox: %v", err)
	}
	if st := s.containerStatus(d); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		s.t.Errorf("container in a stopped sandbox is %v, want CONTAINER_EXITED", st.State)
	}
	sstate := func(st runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStateValue {
		return &runtimeapi.PodSandboxStateValue{State: st}
	}
	scases := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"all of the run", &runtimeapi.PodSandboxFilter{LabelSelector: run}, sorted(sb1, sb2)},
		{"label pod=one", &runtimeapi.PodSandboxFilter{LabelSelector: with("pod", "one")}, sorted(sb1)},
		{"ready", &runtimeapi.PodSandboxFilter{LabelSelector: run, State: sstate(runtimeapi.PodSandboxState_SANDBOX_READY)}, sorted(sb1)},
		{"not ready", &runtimeapi.PodSandboxFilter{LabelSelector: run, State: sstate(runtimeapi.PodSandboxState_SANDBOX_NOTREADY)}, sorted(sb2)},
		{"id", &runtimeapi.PodSandboxFilter{Id: sb2}, sorted(sb2)},
	}
	for _, tc := range scases {
		got, err := s.rt.ListPodSandbox(s.ctx, tc.filter)
		if err != nil {
			s.t.Fatalf("ListPodSandbox(%s): %v", tc.name, err)
		}
		if g := ids(got); !slices.Equal(g, tc.want) {
			s.t.Errorf("ListPodSandbox(%s) = %v, want %v", tc.name, g, tc.want)
		}
	}
}

func (s *suite) execSync() {
	_, id := s.runningContainer()
	cmd := []string{"echo", "hello"}
	s.script(id, cmd, runtimetest.ExecScript{Stdout: "hello\n"})
	res, err := s.rt.ExecSync(s.ctx, id, cmd, 10*time.Second)
	if err != nil {
		s.t.Fatalf("ExecSync: %v", err)
	}
	if string(res.Stdout) != "hello\n" || len(res.Stderr) != 0 || res.ExitCode != 0 {
		s.t.Errorf("ExecSync = stdout %q stderr %q code %d, want hello, nothing, 0", res.Stdout, res.Stderr, res.ExitCode)
	}
}

func (s *suite) execNonZeroExit() {
	_, id := s.runningContainer()
	cmd := shell("echo out; echo err >&2; exit 7")
	s.script(id, cmd, runtimetest.ExecScript{Stdout: "out\n", Stderr: "err\n", ExitCode: 7})
	res, err := s.rt.ExecSync(s.ctx, id, cmd, 10*time.Second)
	if err != nil {
		s.t.Fatalf("ExecSync: %v, want a result with exit code 7", err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 7 {
		s.t.Errorf("ExecSync = stdout %q stderr %q code %d, want out, err, 7", res.Stdout, res.Stderr, res.ExitCode)
	}
}

func (s *suite) execTimeout() {
	_, id := s.runningContainer()
	cmd := []string{"sleep", "30"}
	s.script(id, cmd, runtimetest.ExecScript{Timeout: true})
	start := s.wall.Now()
	res, err := s.rt.ExecSync(s.ctx, id, cmd, time.Second)
	if !errors.Is(err, runtime.ErrExecTimeout) {
		s.t.Fatalf("ExecSync = %v, %v; want an error matching ErrExecTimeout", res, err)
	}
	if el := s.wall.Since(start); s.real() && el > 20*time.Second {
		s.t.Errorf("ExecSync with a 1s timeout took %v", el)
	}
	// The container is still usable.
	s.script(id, []string{"true"}, runtimetest.ExecScript{})
	if _, err := s.rt.ExecSync(s.ctx, id, []string{"true"}, 10*time.Second); err != nil {
		s.t.Errorf("ExecSync after a timeout: %v", err)
	}
}

func (s *suite) execNotRunning() {
	sb, cfg := s.sandbox("pod", nil)
	id := s.container(sb, cfg, "created", shell(sleeper), nil)
	if _, err := s.rt.ExecSync(s.ctx, id, []string{"true"}, 10*time.Second); err == nil {
		s.t.Errorf("ExecSync in a created container: nil error, want one")
	}
	if _, err := s.rt.ExecSync(s.ctx, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", []string{"true"}, 10*time.Second); err == nil {
		s.t.Errorf("ExecSync in a missing container: nil error, want one")
	}
}

func (s *suite) stopTimeout() {
	sb, cfg := s.sandbox("pod", nil)
	id := s.container(sb, cfg, "stubborn", shell(`trap "" TERM; sleep 3600`), nil)
	s.start(id)
	s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	start := s.wall.Now()
	if err := s.rt.StopContainer(s.ctx, id, time.Second); err != nil {
		s.t.Fatalf("StopContainer: %v", err)
	}
	el := s.wall.Since(start)
	st := s.containerStatus(id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		s.t.Errorf("state after StopContainer = %v, want CONTAINER_EXITED", st.State)
	}
	if s.real() {
		if el < 900*time.Millisecond {
			s.t.Errorf("StopContainer of a process that ignores SIGTERM took %v, want the 1s grace period", el)
		}
		if st.ExitCode != 137 {
			s.t.Errorf("exit code %d, want 137 (SIGKILL)", st.ExitCode)
		}
	}
	s.t.Logf("StopContainer with a 1s grace period took %v", el)
}

func (s *suite) removeRunning() {
	sb, id := s.runningContainer()
	// A running container is removed.
	if err := s.rt.RemoveContainer(s.ctx, id); err != nil {
		s.t.Fatalf("RemoveContainer of a running container: %v", err)
	}
	if _, err := s.rt.ContainerStatus(s.ctx, id, false); !runtime.IsNotFound(err) {
		s.t.Errorf("ContainerStatus after remove: %v, want NotFound", err)
	}
	if st := s.sandboxStatus(sb); st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		s.t.Errorf("sandbox is %v after its running container was removed, want SANDBOX_READY", st.State)
	}
	// A ready sandbox with a running container is removed with it.
	sb2, cfg2 := s.sandbox("pod", nil)
	id2 := s.container(sb2, cfg2, "main", shell(sleeper), nil)
	s.start(id2)
	s.waitState(id2, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := s.rt.RemovePodSandbox(s.ctx, sb2); err != nil {
		s.t.Fatalf("RemovePodSandbox of a ready sandbox: %v", err)
	}
	if _, err := s.rt.PodSandboxStatus(s.ctx, sb2, false); !runtime.IsNotFound(err) {
		s.t.Errorf("PodSandboxStatus after remove: %v, want NotFound", err)
	}
	if _, err := s.rt.ContainerStatus(s.ctx, id2, false); !runtime.IsNotFound(err) {
		s.t.Errorf("ContainerStatus of a container of a removed sandbox: %v, want NotFound", err)
	}
	list, err := s.rt.ListContainers(s.ctx, &runtimeapi.ContainerFilter{PodSandboxId: sb2})
	if err != nil {
		s.t.Fatalf("ListContainers: %v", err)
	}
	if len(list) != 0 {
		s.t.Errorf("ListContainers of a removed sandbox = %v, want none", ids(list))
	}
}

// missing IDs look like real ones.
const (
	missingSandbox   = "5a4d6d7d9d1f0e3c2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a1908f7e6d5c4b"
	missingContainer = "c0ffee0000000000000000000000000000000000000000000000000000c0ffee"
)

func (s *suite) idempotent() {
	for name, call := range map[string]func() error{
		"StopContainer":    func() error { return s.rt.StopContainer(s.ctx, missingContainer, time.Second) },
		"RemoveContainer":  func() error { return s.rt.RemoveContainer(s.ctx, missingContainer) },
		"StopPodSandbox":   func() error { return s.rt.StopPodSandbox(s.ctx, missingSandbox) },
		"RemovePodSandbox": func() error { return s.rt.RemovePodSandbox(s.ctx, missingSandbox) },
	} {
		if err := call(); err != nil {
			s.t.Errorf("%s of a missing object: %v, want nil", name, err)
		}
	}
}

func (s *suite) notFound() {
	if _, err := s.rt.PodSandboxStatus(s.ctx, missingSandbox, false); !runtime.IsNotFound(err) {
		s.t.Errorf("PodSandboxStatus(missing) = %v, want NotFound", err)
	}
	if _, err := s.rt.ContainerStatus(s.ctx, missingContainer, false); !runtime.IsNotFound(err) {
		s.t.Errorf("ContainerStatus(missing) = %v, want NotFound", err)
	}
	sb, cfg := s.sandbox("pod", nil)
	if err := s.rt.StartContainer(s.ctx, missingContainer); err == nil {
		s.t.Errorf("StartContainer(missing): nil error, want one")
	}
	badImage := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "bad"},
		Image:    &runtimeapi.ImageSpec{Image: "example.invalid/missing:" + s.run},
	}
	if _, err := s.rt.CreateContainer(s.ctx, sb, badImage, cfg); err == nil {
		s.t.Errorf("CreateContainer with a missing image: nil error, want one")
	}
}

func (s *suite) updateRuntimeConfig() {
	cfg := &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.244.7.0/24"}}
	if err := s.rt.UpdateRuntimeConfig(s.ctx, cfg); err != nil {
		s.t.Fatalf("UpdateRuntimeConfig(pod CIDR 10.244.7.0/24): %v", err)
	}
	if f := s.target.Fake; f != nil {
		if got := f.RuntimeConfig().GetNetworkConfig().GetPodCidr(); got != "10.244.7.0/24" {
			s.t.Errorf("fake's pod CIDR = %q, want 10.244.7.0/24", got)
		}
	}
}

func (s *suite) updateContainerResources() {
	_, id := s.runningContainer()
	res := &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000}}
	if err := s.rt.UpdateContainerResources(s.ctx, id, res); err != nil {
		s.t.Fatalf("UpdateContainerResources of a running container: %v", err)
	}
	if st := s.containerStatus(id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		s.t.Errorf("container is %v after UpdateContainerResources, want CONTAINER_RUNNING", st.State)
	}
	if err := s.rt.UpdateContainerResources(s.ctx, missingContainer, res); err == nil {
		s.t.Errorf("UpdateContainerResources of a missing container: nil error, want one")
	}
}

func (s *suite) reopenContainerLog() {
	sb, cfg := s.sandbox("pod", nil)
	id := s.container(sb, cfg, "main", shell(sleeper), nil)
	if err := s.rt.ReopenContainerLog(s.ctx, id); err == nil {
		s.t.Errorf("ReopenContainerLog of a created container: nil error, want one")
	}
	s.start(id)
	s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := s.rt.ReopenContainerLog(s.ctx, id); err != nil {
		s.t.Errorf("ReopenContainerLog of a running container: %v", err)
	}
	if err := s.rt.ReopenContainerLog(s.ctx, missingContainer); err == nil {
		s.t.Errorf("ReopenContainerLog of a missing container: nil error, want one")
	}
}

// containerEvents watches the runtime's container events while a container
// is created, started, stopped and removed, and checks each of the four
// events names the container and carries its sandbox's status (and, but for
// the deletion, the container's status in the state the event reports).
// Unimplemented is a skip.
func (s *suite) containerEvents() {
	w, ok := s.rt.(runtime.ContainerEventWatcher)
	if !ok {
		s.t.Skip("runtime does not implement runtime.ContainerEventWatcher")
	}
	ctx, cancel := context.WithCancel(s.ctx)
	evs := make(chan *runtimeapi.ContainerEventResponse, 1024)
	done := make(chan error, 1)
	go func() {
		done <- w.WatchContainerEvents(ctx, func(ev *runtimeapi.ContainerEventResponse) {
			select {
			case evs <- ev:
			case <-ctx.Done():
			}
		})
	}()
	var watchErr error
	ended := false
	defer func() {
		cancel()
		if !ended {
			<-done
		}
	}()
	// Wait for the stream: a fake counts it; a real runtime gets half a
	// second to answer Unimplemented before the suite goes ahead.
	deadline := s.wall.Now().Add(500 * time.Millisecond)
	for !ended {
		if s.target.Fake != nil && s.target.Fake.ContainerEventStreams() > 0 {
			break
		}
		if s.target.Fake == nil && s.wall.Now().After(deadline) {
			break
		}
		select {
		case watchErr = <-done:
			ended = true
		case <-s.wall.After(time.Millisecond):
		}
	}
	if ended {
		if runtime.IsUnimplemented(watchErr) {
			s.t.Skipf("GetContainerEvents is Unimplemented: %v", watchErr)
		}
		s.t.Fatalf("WatchContainerEvents ended before anything happened: %v", watchErr)
	}

	sb, cfg := s.sandbox("pod", nil)
	id := s.container(sb, cfg, "main", shell(sleeper), nil)
	s.start(id)
	s.waitState(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if err := s.rt.StopContainer(s.ctx, id, 10*time.Second); err != nil {
		s.t.Fatalf("StopContainer: %v", err)
	}
	if err := s.rt.RemoveContainer(s.ctx, id); err != nil {
		s.t.Fatalf("RemoveContainer: %v", err)
	}

	want := []struct {
		typ   runtimeapi.ContainerEventType
		state runtimeapi.ContainerState
	}{
		{runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, runtimeapi.ContainerState_CONTAINER_CREATED},
		{runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, runtimeapi.ContainerState_CONTAINER_RUNNING},
		{runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, runtimeapi.ContainerState_CONTAINER_EXITED},
		{runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, runtimeapi.ContainerState_CONTAINER_UNKNOWN}, // no status to check
	}
	timeout := s.wall.After(30 * time.Second)
	for i := 0; i < len(want); {
		var ev *runtimeapi.ContainerEventResponse
		select {
		case ev = <-evs:
		case err := <-done:
			ended = true
			s.t.Fatalf("WatchContainerEvents ended after %d of the container's 4 events: %v", i, err)
		case <-timeout:
			s.t.Fatalf("%d of the container's 4 events within 30s; next wanted %v", i, want[i].typ)
		}
		if ev.ContainerId != id {
			continue
		}
		wt := want[i]
		i++
		if ev.ContainerEventType != wt.typ {
			s.t.Errorf("event %d of the container is %v, want %v", i, ev.ContainerEventType, wt.typ)
			continue
		}
		if ev.CreatedAt == 0 {
			s.t.Errorf("%v: no creation time", wt.typ)
		}
		if ps := ev.PodSandboxStatus; ps.GetId() != sb || ps.GetLabels()[runLabel] != s.run {
			s.t.Errorf("%v: sandbox status %q labels %v, want %q with %s=%s", wt.typ, ps.GetId(), ps.GetLabels(), sb, runLabel, s.run)
		}
		if wt.typ == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
			continue
		}
		found := false
		for _, c := range ev.ContainersStatuses {
			if c.GetId() == id {
				found = true
				if c.State != wt.state {
					s.t.Errorf("%v: container status %v, want %v", wt.typ, c.State, wt.state)
				}
			}
		}
		if !found {
			s.t.Errorf("%v: the container's status is not among the event's %d", wt.typ, len(ev.ContainersStatuses))
		}
	}
	cancel()
	if !ended {
		ended = true
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			s.t.Errorf("WatchContainerEvents after its context ended: %v, want context.Canceled", err)
		}
	}
}

func (s *suite) podSandboxMetrics() {
	m, ok := s.rt.(runtime.PodSandboxMetricsLister)
	if !ok {
		s.t.Skip("runtime does not implement runtime.PodSandboxMetricsLister")
	}
	if _, err := m.ListPodSandboxMetrics(s.ctx); err != nil {
		if runtime.IsUnimplemented(err) {
			s.t.Skipf("ListPodSandboxMetrics is Unimplemented: %v", err)
		}
		s.t.Errorf("ListPodSandboxMetrics: %v", err)
	}
}
