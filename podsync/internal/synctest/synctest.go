// Package synctest holds what the tests of podsync and podsync/cri share:
// pod and runtime-state fixtures, a recording status writer, and a harness
// that steps an engine over the in-memory runtime. It is for tests only and
// does not link package testing.
package synctest

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// T0 is the fixtures' start time and the harness clock's.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestPod is pod default/web (UID uid-1) on the host network with one
// busybox container per name.
func TestPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	pod.Spec.RestartPolicy = policy
	pod.Spec.HostNetwork = true
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox:1.36"})
	}
	return pod
}

// WithInit adds init containers (restartable sidecars if sidecar) to pod.
func WithInit(pod *corev1.Pod, sidecar bool, names ...string) *corev1.Pod {
	for _, n := range names {
		c := corev1.Container{Name: n, Image: "busybox:1.36"}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	return pod
}

// WithEphemeral adds ephemeral containers targeting container a to pod.
func WithEphemeral(pod *corev1.Pod, names ...string) *corev1.Pod {
	for _, n := range names {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: "busybox:1.36"}, TargetContainerName: "a"})
	}
	return pod
}

// BusyboxPod is TestPod with the image the in-memory runtime has.
func BusyboxPod(policy corev1.RestartPolicy, names ...string) *corev1.Pod {
	p := TestPod(policy, names...)
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Image = runtimetest.BusyboxImage
		p.Spec.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
	}
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].Image = runtimetest.BusyboxImage
	}
	return p
}

// ReadySandbox is ready sandbox sb1 on the host network.
func ReadySandbox() *podsync.SandboxState {
	return &podsync.SandboxState{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, HostNetwork: true, CreatedAt: T0}
}

// Running is container name of pod, running in sb1 since T0.
func Running(pod *corev1.Pod, name string) *podsync.ContainerState {
	return &podsync.ContainerState{ID: "c-" + name, SandboxID: "sb1", Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Hash: podsync.HashContainer(&corev1.Container{Name: name, Image: "busybox:1.36"}), StartedAt: T0}
}

// Exited is Running, exited with code a second after T0.
func Exited(pod *corev1.Pod, name string, code int32) *podsync.ContainerState {
	c := Running(pod, name)
	c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, T0.Add(time.Second)
	return c
}

// FakeProbes are probe results keyed "name/Type".
type FakeProbes map[string]probe.Update

// Latest implements podsync.ProbeResults.
func (f FakeProbes) Latest(_ types.UID, name string, t probe.Type) (probe.Update, bool) {
	u, ok := f[name+"/"+t.String()]
	return u, ok
}

// UpdatePodStatus implements podsync.ProbeResults; it changes nothing.
func (f FakeProbes) UpdatePodStatus(*corev1.Pod, *corev1.PodStatus) {}

// Cond is condition t of s as "Status/Reason", or "missing".
func Cond(s corev1.PodStatus, t corev1.PodConditionType) string {
	for _, c := range s.Conditions {
		if c.Type == t {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return "missing"
}

// RecordingWriter is a podsync.StatusWriter that keeps what it was given.
// Read its fields under Mu.
type RecordingWriter struct {
	Mu         sync.Mutex
	Statuses   map[types.UID][]corev1.PodStatus
	Terminated []types.UID
	Removed    []types.UID
}

// SetPodStatus implements podsync.StatusWriter.
func (r *RecordingWriter) SetPodStatus(pod *corev1.Pod, s corev1.PodStatus) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if r.Statuses == nil {
		r.Statuses = map[types.UID][]corev1.PodStatus{}
	}
	r.Statuses[pod.UID] = append(r.Statuses[pod.UID], s)
}

// PodTerminated implements podsync.StatusWriter.
func (r *RecordingWriter) PodTerminated(pod *corev1.Pod) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.Terminated = append(r.Terminated, pod.UID)
}

// RemovePod implements podsync.StatusWriter.
func (r *RecordingWriter) RemovePod(uid types.UID) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.Removed = append(r.Removed, uid)
}

// SawWaiting reports whether any status written for uid had its first
// container waiting for reason.
func (r *RecordingWriter) SawWaiting(uid types.UID, reason string) bool {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	for _, s := range r.Statuses[uid] {
		if w := s.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == reason {
			return true
		}
	}
	return false
}

// Last is the last status written for uid (zero if none).
func (r *RecordingWriter) Last(uid types.UID) corev1.PodStatus {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	s := r.Statuses[uid]
	if len(s) == 0 {
		return corev1.PodStatus{}
	}
	return s[len(s)-1]
}

// Calls records, in order, what a backend was asked.
type Calls struct {
	mu  sync.Mutex
	log []string
}

// Add records s.
func (c *Calls) Add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

// Get is what was recorded.
func (c *Calls) Get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// RelisterFunc is a podsync.Relister from a function.
type RelisterFunc func(context.Context) (map[types.UID]*podsync.PodState, error)

// Relist implements podsync.Relister.
func (f RelisterFunc) Relist(ctx context.Context) (map[types.UID]*podsync.PodState, error) {
	return f(ctx)
}

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
}

// SyncerOptions is what the harness gives the function that builds its
// syncer.
type SyncerOptions struct {
	Runtime    *runtimetest.Runtime
	Clock      *clocktesting.FakeClock
	PodLogRoot string
	PodRoot    string
	HostIPs    []string
}

// Harness steps an engine whose syncer S runs on the in-memory runtime,
// under a fake clock, writing status to a RecordingWriter.
type Harness[S podsync.PodSyncer] struct {
	T      TB
	Ctx    context.Context
	Clock  *clocktesting.FakeClock
	RT     *runtimetest.Runtime
	Syncer S
	Eng    *podsync.Engine
	Writer *RecordingWriter
	// LogRoot is the syncer's PodLogRoot.
	LogRoot string

	newSyncer func(SyncerOptions) (S, error)
}

// NewHarness is a harness whose syncer newSyncer builds, on host IP 192.0.2.1.
func NewHarness[S podsync.PodSyncer](t TB, newSyncer func(SyncerOptions) (S, error)) *Harness[S] {
	t.Helper()
	h := &Harness[S]{T: t, Ctx: context.Background(), Clock: clocktesting.NewFakeClock(T0), Writer: &RecordingWriter{}, newSyncer: newSyncer}
	h.RT = runtimetest.New(runtimetest.Options{Clock: h.Clock})
	h.NewEngine()
	return h
}

// NewEngine replaces the syncer and the engine with new ones on the same
// runtime, clock and writer (an agent's restart).
func (h *Harness[S]) NewEngine() {
	h.T.Helper()
	dir := h.T.TempDir()
	h.LogRoot = dir + "/logs"
	var err error
	h.Syncer, err = h.newSyncer(SyncerOptions{Runtime: h.RT, Clock: h.Clock, PodLogRoot: h.LogRoot, PodRoot: dir + "/pods", HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		h.T.Fatal(err)
	}
	h.Eng, err = podsync.New(podsync.Options{Syncer: h.Syncer, Writer: h.Writer, Clock: h.Clock, HostIPs: []string{"192.0.2.1"}})
	if err != nil {
		h.T.Fatal(err)
	}
}

// Add hands the engine pod and runs two steps (sync, relist and sync).
func (h *Harness[S]) Add(pod *corev1.Pod) {
	h.T.Helper()
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	h.Steps(2)
}

// Steps runs n engine steps, each after a relist.
func (h *Harness[S]) Steps(n int) {
	h.T.Helper()
	for range n {
		h.Eng.RelistNow() // the runtime changes behind the engine's back
		if _, err := h.Eng.SyncOnce(h.Ctx); err != nil {
			h.T.Fatalf("SyncOnce: %v", err)
		}
	}
}

// Containers lists the runtime's containers in state.
func (h *Harness[S]) Containers(state runtimeapi.ContainerState) []*runtimeapi.Container {
	cs, err := h.RT.ListContainers(h.Ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: state}})
	if err != nil {
		h.T.Fatal(err)
	}
	return cs
}
