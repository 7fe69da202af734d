package podsynctest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/backoff"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/probe"
)

// Stages is how one simulated container behaves: it is created, starts
// StartDelay later, runs for RunFor (0: until stopped) and then exits with
// ExitCode. A stopped container exits with StopExitCode.
type Stages struct {
	StartDelay   time.Duration
	RunFor       time.Duration
	ExitCode     int32
	StopExitCode int32
	// FailCreate makes every create of the container fail with this
	// message (a CreateContainerError).
	FailCreate string
}

// Options configure a Backend. The zero value of each field means its default.
type Options struct {
	// Clock times the stages. Default clock.RealClock{}; tests pass a fake clock.
	Clock clock.PassiveClock
	// Stages returns how a pod's container behaves. Default: starts at once
	// and runs until stopped.
	Stages func(pod *corev1.Pod, container string) Stages
	// SandboxDelay is how long a new sandbox takes to become ready; the pod's
	// containers wait for it. Default 0.
	SandboxDelay time.Duration
	// PodIP returns the IP of a pod's sandbox. Default 10.88.<n>.<m>, one per pod.
	PodIP func(pod *corev1.Pod) string
	// RuntimeName prefixes container IDs. Default "sim".
	RuntimeName string
	// Probes gives the planner the pods' liveness and startup results, so
	// that a container failing its liveness or startup probe is restarted
	// as the kubelet restarts it: pass the pod half's probe manager
	// (podsync.BackendParts.Probes). Default nil: no probe ever fails.
	Probes *probe.Manager
}

// simSandbox and simContainer hold their state by pointer, copied on every
// change and never changed in place, so that a snapshot shares it.
type simSandbox struct {
	*podsync.SandboxState
	readyAt time.Time
	stopped bool
}

type simContainer struct {
	*podsync.ContainerState
	stages  Stages
	startAt time.Time
}

type simPod struct {
	name, namespace string
	sandboxes       []*simSandbox
	containers      []*simContainer
	// starting are containers still in their start delay: not in the
	// runtime yet (the status shows ContainerCreating), and not started twice.
	starting []*simContainer
	// gen counts the pod's changes; seen is gen as the last relist saw it,
	// so that a sync can tell the engine of changes it has not observed.
	gen, seen uint64
	// snap is the pod's last snapshot, taken at gen snapGen: a relist that
	// finds no change returns it again (PodStates are never modified), so
	// that an idle node's relist neither builds nor compares anything.
	snap    *podsync.PodState
	snapGen uint64
}

// Backend is a simulated podsync.PodSyncer and podsync.Relister: pods go
// through their stages on the clock, planned by podsync.ComputePodActions
// with the kubelet's rules and crash-loop back-off (10s doubling to 5m).
// Nothing runs. Safe for concurrent use.
type Backend struct {
	o Options

	mu        sync.Mutex
	pods      map[types.UID]*simPod
	crashLoop backoff.Map[string]
	seq       int
}

var (
	_ podsync.PodSyncer   = (*Backend)(nil)
	_ podsync.PodRelister = (*Backend)(nil)
)

// New returns a Backend with no pods.
func New(o Options) *Backend {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Stages == nil {
		o.Stages = func(*corev1.Pod, string) Stages { return Stages{StopExitCode: 137} }
	}
	if o.RuntimeName == "" {
		o.RuntimeName = "sim"
	}
	return &Backend{o: o, pods: map[types.UID]*simPod{},
		crashLoop: backoff.Map[string]{Initial: 10 * time.Second, Max: 5 * time.Minute}}
}

// RuntimeName is the prefix of the simulated container IDs.
func (b *Backend) RuntimeName() string { return b.o.RuntimeName }

func (b *Backend) id(kind string) string {
	b.seq++
	return fmt.Sprintf("%s-%06d", kind, b.seq)
}

// advance moves the pod's sandboxes and containers along their stages up to
// now; pods do not depend on each other, so a call about one pod advances
// that pod alone. The caller holds the Backend's lock.
func (p *simPod) advance(now time.Time) {
	for _, s := range p.sandboxes {
		if !s.stopped && s.State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY && !now.Before(s.readyAt) {
			s.setState(runtimeapi.PodSandboxState_SANDBOX_READY)
			p.gen++
		}
	}
	kept := p.starting[:0]
	for _, c := range p.starting {
		if now.Before(c.startAt) {
			kept = append(kept, c)
			continue
		}
		st := *c.ContainerState
		st.State, st.CreatedAt, st.StartedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, c.startAt, c.startAt
		c.ContainerState = &st
		p.containers = append(p.containers, c)
		p.gen++
	}
	p.starting = kept
	for _, c := range p.containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && c.stages.RunFor > 0 {
			if end := c.StartedAt.Add(c.stages.RunFor); !now.Before(end) {
				c.exit(end, c.stages.ExitCode)
				p.gen++
			}
		}
	}
}

// nextChange is how long after now the pod's stages next change it (a
// sandbox ready, a container started or exiting), 0 when none is due.
func (p *simPod) nextChange(now time.Time) time.Duration {
	var next time.Duration
	soonest := func(at time.Time) {
		if d := at.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, s := range p.sandboxes {
		if !s.stopped && s.State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			soonest(s.readyAt)
		}
	}
	for _, c := range p.starting {
		soonest(c.startAt)
	}
	for _, c := range p.containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && c.stages.RunFor > 0 {
			soonest(c.StartedAt.Add(c.stages.RunFor))
		}
	}
	return next
}

// exit makes the container exited at at with code.
func (c *simContainer) exit(at time.Time, code int32) {
	st := *c.ContainerState
	st.State, st.FinishedAt, st.ExitCode = runtimeapi.ContainerState_CONTAINER_EXITED, at, code
	st.Reason = "Completed"
	if code != 0 {
		st.Reason = "Error"
	}
	c.ContainerState = &st
}

// setState gives the sandbox state to.
func (s *simSandbox) setState(to runtimeapi.PodSandboxState) {
	st := *s.SandboxState
	st.State = to
	s.SandboxState = &st
}

// Relist reports every simulated pod as it is at the clock's now.
func (b *Backend) Relist(context.Context) (map[types.UID]*podsync.PodState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.o.Clock.Now()
	out := make(map[types.UID]*podsync.PodState, len(b.pods))
	for uid, p := range b.pods {
		p.advance(now)
		p.seen = p.gen
		out[uid] = p.snapshot(uid)
	}
	return out, nil
}

// RelistPod is Relist for one pod (nil when the backend has none of it):
// the backend is a podsync.PodRelister, so the engine looks at a pod alone
// after a sync changed it, and after stopping it.
func (b *Backend) RelistPod(_ context.Context, uid types.UID) (*podsync.PodState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pods[uid]
	if p == nil {
		return nil, nil
	}
	p.advance(b.o.Clock.Now())
	p.seen = p.gen
	return p.snapshot(uid), nil
}

func (p *simPod) snapshot(uid types.UID) *podsync.PodState {
	if p.snap != nil && p.snapGen == p.gen {
		return p.snap
	}
	st := &podsync.PodState{UID: uid, Name: p.name, Namespace: p.namespace}
	for i := len(p.sandboxes) - 1; i >= 0; i-- {
		st.Sandboxes = append(st.Sandboxes, p.sandboxes[i].SandboxState)
	}
	for i := len(p.containers) - 1; i >= 0; i-- {
		st.Containers = append(st.Containers, p.containers[i].ContainerState)
	}
	p.snap, p.snapGen = st, p.gen
	return st
}

// Exit makes the pod's running container name exit now with code, as a
// crash would. It reports whether such a container was running.
func (b *Backend) Exit(uid types.UID, name string, code int32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pods[uid]
	if p == nil {
		return false
	}
	p.advance(b.o.Clock.Now())
	for i := len(p.containers) - 1; i >= 0; i-- {
		if c := p.containers[i]; c.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.exit(b.o.Clock.Now(), code)
			p.gen++
			return true
		}
	}
	return false
}

// SyncPod plans with podsync.ComputePodActions and applies the actions to
// the simulation.
//
// The result asks for the pod's next sync when its stages next change it,
// and tells the engine of changes its last relist did not see (Changed),
// so that the engine relists when the simulation changed, not only at its
// relist period.
func (b *Backend) SyncPod(_ context.Context, pod *corev1.Pod, _ *podsync.PodState) (podsync.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.o.Clock.Now()
	p := b.pods[pod.UID]
	if p == nil {
		p = &simPod{name: pod.Name, namespace: pod.Namespace}
		b.pods[pod.UID] = p
	}
	p.advance(now)
	res, err := b.syncPodLocked(pod, p, now)
	res.RequeueWithin(p.nextChange(now))
	if p.gen != p.seen {
		res.Changed = true
	}
	return res, err
}

func (b *Backend) syncPodLocked(pod *corev1.Pod, p *simPod, now time.Time) (podsync.SyncResult, error) {
	in := podsync.PlanInput{Pod: pod, State: p.snapshot(pod.UID), Now: now,
		CrashLoopWait: func(key string, at time.Time) time.Duration { return b.crashLoop.Wait(key, at) }}
	if b.o.Probes != nil {
		in.Probes = b.o.Probes
	}
	a := podsync.ComputePodActions(in)
	res := a.BackOffResult(now)
	if a.Empty() {
		return res, nil
	}
	// What the actions change counts in p.gen: SyncPod reports it.
	if a.KillPod {
		p.stopAll(now)
		if !a.CreateSandbox {
			return res, nil
		}
	}
	if a.CreateSandbox {
		st := &podsync.SandboxState{ID: b.id("sandbox"), Attempt: a.Attempt, CreatedAt: now,
			HostNetwork: pod.Spec.HostNetwork, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
		if !pod.Spec.HostNetwork {
			ip := fmt.Sprintf("10.88.%d.%d", (b.seq/250)%250, b.seq%250+1)
			if b.o.PodIP != nil {
				ip = b.o.PodIP(pod)
			}
			st.IPs = []string{ip}
		}
		if b.o.SandboxDelay == 0 {
			st.State = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		s := &simSandbox{SandboxState: st, readyAt: now.Add(b.o.SandboxDelay)}
		p.sandboxes = append(p.sandboxes, s)
		p.gen++
		a.SandboxID = s.ID
	}
	for _, k := range a.Kill {
		for _, c := range p.containers {
			if c.ID == k.ID && c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				c.exit(now, c.stages.StopExitCode)
				p.gen++
			}
		}
	}
	var err error
	for _, ref := range a.Start {
		spec := ref.Spec(pod)
		if p.isStarting(spec.Name) {
			continue
		}
		stages := b.o.Stages(pod, spec.Name)
		if stages.FailCreate != "" {
			res.SetWaiting(spec.Name, podsync.ReasonCreateContainerError, stages.FailCreate)
			err = fmt.Errorf("create container %s: %s", spec.Name, stages.FailCreate)
			continue
		}
		restarts := 0
		if prev := observedLatest(p, spec.Name); prev != nil {
			restarts = prev.RestartCount + 1
			if prev.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				b.crashLoop.Next(podsync.CrashLoopKey(pod, spec), now)
			}
		}
		c := &simContainer{stages: stages, startAt: now.Add(stages.StartDelay)}
		c.ContainerState = &podsync.ContainerState{ID: b.id("container"), SandboxID: a.SandboxID, Name: spec.Name, Image: spec.Image,
			ImageRef: "sim://" + spec.Image, State: runtimeapi.ContainerState_CONTAINER_CREATED, Hash: podsync.HashContainer(spec),
			RestartCount: restarts, CreatedAt: now}
		p.starting = append(p.starting, c)
		p.gen++
		res.RequeueWithin(stages.StartDelay)
	}
	p.advance(now)
	return res, err
}

func observedLatest(p *simPod, name string) *simContainer {
	for i := len(p.containers) - 1; i >= 0; i-- {
		if p.containers[i].Name == name {
			return p.containers[i]
		}
	}
	return nil
}

func (p *simPod) isStarting(name string) bool {
	for _, c := range p.starting {
		if c.Name == name {
			return true
		}
	}
	return false
}

func (p *simPod) stopAll(now time.Time) {
	p.gen++
	p.starting = nil
	for _, c := range p.containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			c.exit(now, c.stages.StopExitCode)
		}
	}
	for _, s := range p.sandboxes {
		if s.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			s.setState(runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
		}
		s.stopped = true
	}
}

// SyncTerminatingPod stops the pod's containers at once (the simulation has
// no grace to wait out).
func (b *Backend) SyncTerminatingPod(_ context.Context, pod *corev1.Pod, _ *podsync.PodState, _ time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.o.Clock.Now()
	if p := b.pods[pod.UID]; p != nil {
		p.advance(now)
		p.stopAll(now)
	}
	return nil
}

// SyncTerminatedPod forgets the pod.
func (b *Backend) SyncTerminatedPod(_ context.Context, pod *corev1.Pod, _ *podsync.PodState) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pods, pod.UID)
	return nil
}

// StartedAt returns when the pod's container with the runtime ID
// containerID (bare, or "<runtime>://<id>" as in a ContainerStatus)
// started, and false when the simulation holds no such container that has
// started. Rules.Prober measures probe outcomes from it
// (ProberOptions.StartedAt). A nil Backend holds no containers.
func (b *Backend) StartedAt(uid types.UID, containerID string) (time.Time, bool) {
	if b == nil {
		return time.Time{}, false
	}
	if i := strings.Index(containerID, "://"); i >= 0 {
		containerID = containerID[i+3:]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pods[uid]
	if p == nil {
		return time.Time{}, false
	}
	for _, c := range p.containers {
		if c.ID == containerID {
			return c.StartedAt, !c.StartedAt.IsZero()
		}
	}
	for _, c := range p.starting {
		if c.ID == containerID && !b.o.Clock.Now().Before(c.startAt) {
			return c.startAt, true
		}
	}
	return time.Time{}, false
}

// Pods lists the UIDs of the pods the simulation holds, sorted.
func (b *Backend) Pods() []types.UID {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]types.UID, 0, len(b.pods))
	for uid := range b.pods {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
