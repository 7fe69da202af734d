package podsync

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/probe"
)

// ProbeResults is the sliver of *probe.Manager the planner and the status
// generator read: the latest published result of a container's probe, and
// Started/Ready filled into container statuses.
type ProbeResults interface {
	Latest(podUID types.UID, containerName string, t probe.Type) (probe.Update, bool)
	UpdatePodStatus(pod *corev1.Pod, status *corev1.PodStatus)
}

var _ ProbeResults = (*probe.Manager)(nil)

// PlanInput is everything the planner looks at. Nothing in it is modified.
type PlanInput struct {
	Pod   *corev1.Pod
	State *PodState
	// Probes gives liveness and startup results; nil: none failed.
	Probes ProbeResults
	Now    time.Time
	// CrashLoopWait returns the crash-loop back-off that key (CrashLoopKey)
	// had when its container finished at finishedAt, 0 if none: a container
	// that exited is not restarted before finishedAt plus that wait. nil: no
	// back-off.
	CrashLoopWait func(key string, finishedAt time.Time) time.Duration
}

// ContainerRef names a container of the pod's spec.
type ContainerRef struct {
	// Init: an init container (spec.initContainers); Ephemeral: an
	// ephemeral container (spec.ephemeralContainers); else a regular one.
	Init, Ephemeral bool
	Index           int
}

// Spec returns the container ref names in pod; for an ephemeral container,
// a copy of its fields as a Container.
func (r ContainerRef) Spec(pod *corev1.Pod) *corev1.Container {
	switch {
	case r.Init:
		return &pod.Spec.InitContainers[r.Index]
	case r.Ephemeral:
		c := corev1.Container(pod.Spec.EphemeralContainers[r.Index].EphemeralContainerCommon)
		return &c
	}
	return &pod.Spec.Containers[r.Index]
}

// ContainerSpec returns the spec of the pod's container called name: an
// init, regular or ephemeral container; nil when the pod has none.
func ContainerSpec(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return ContainerRef{Ephemeral: true, Index: i}.Spec(pod)
		}
	}
	return nil
}

// KillAction is a running container to stop.
type KillAction struct {
	ID, Name string
	// Reason is the Killing event's message; Probe is set when a probe
	// failure caused the kill (its terminationGracePeriodSeconds applies).
	Reason string
	Probe  *corev1.Probe
}

// BackOffAction is a container held back by crash-loop back-off.
type BackOffAction struct {
	Name    string
	Until   time.Time
	Message string
}

// PodActions is what a sync must do, in this order: kill the pod (every
// container, then the sandboxes), create a sandbox, kill the containers in
// Kill, start Start in order.
type PodActions struct {
	// KillPod: stop every container and sandbox of the pod (before a new
	// sandbox, or because nothing is left to run).
	KillPod bool
	// CreateSandbox with attempt Attempt; else SandboxID is the sandbox in use.
	CreateSandbox bool
	Attempt       uint32
	SandboxID     string
	Kill          []KillAction
	// Start lists the containers to create and start: ephemeral containers
	// first, then init containers in order, then regular ones.
	Start   []ContainerRef
	BackOff []BackOffAction
	// Kept counts the running containers left as they are.
	Kept int
	// InitFailed: a non-restartable init container failed and the pod's
	// restartPolicy is Never.
	InitFailed bool
}

// Empty reports whether the actions do nothing.
func (a *PodActions) Empty() bool {
	return !a.KillPod && !a.CreateSandbox && len(a.Kill) == 0 && len(a.Start) == 0
}

// CrashLoopKey is the key of a container's crash-loop back-off: FNV-64a of
// pod name, namespace, UID, container name, image and resources, as the
// kubelet keys it, so a changed image or resources start a fresh back-off.
func CrashLoopKey(pod *corev1.Pod, c *corev1.Container) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%s/%s/%s/%v", pod.Name, pod.Namespace, pod.UID, c.Name, c.Image, c.Resources.String())
	return strconv.FormatUint(h.Sum64(), 16)
}

// IsSidecar reports whether an init container is restartable (restartPolicy
// Always): a sidecar, started in order with the init containers and kept
// running beside the regular ones.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// ComputePodActions is the pure planner: from the desired pod, what runs
// (in.State), probe results and back-off it decides what a sync does, by the
// kubelet's rules (see the package documentation). It does no I/O.
func ComputePodActions(in PlanInput) PodActions {
	pod, st := in.Pod, in.State
	if st == nil {
		st = &PodState{}
	}
	var a PodActions
	create, attempt, sandboxID := sandboxChanged(pod, st)
	if create {
		a.KillPod = true
		a.CreateSandbox = true
		a.Attempt = attempt
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever && attempt != 0 && len(st.Containers) > 0 {
			// Never restart: the pod is done with its sandbox.
			a.CreateSandbox = false
			return a
		}
		if len(pod.Spec.InitContainers) > 0 {
			a.Start = append(a.Start, ContainerRef{Init: true})
			return a
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
				if l := st.Latest(c.Name); l != nil && l.Exited() && l.ExitCode == 0 {
					continue
				}
			}
			a.Start = append(a.Start, ContainerRef{Index: i})
		}
		if len(a.Start) == 0 && len(pod.Spec.Containers) > 0 {
			a.CreateSandbox = false
		}
		return a
	}
	a.SandboxID = sandboxID
	p := planner{in: in, st: st, a: &a}
	p.killStrays()
	// Ephemeral containers start once, in an existing sandbox, and are
	// never restarted.
	for i := range pod.Spec.EphemeralContainers {
		if st.Latest(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.Start = append(a.Start, ContainerRef{Ephemeral: true, Index: i})
		}
	}
	ephemeral := len(a.Start)
	if !p.initContainers() {
		if a.InitFailed {
			a.KillPod = true
			a.Start, a.Kill = nil, nil
		}
		return a
	}
	kept := p.regularContainers()
	if kept == 0 && len(a.Start) == ephemeral && len(a.BackOff) == 0 {
		a.KillPod = true
		a.Kill, a.Start = nil, nil
	}
	return a
}

// sandboxChanged decides whether the pod needs a new sandbox and with which
// attempt number, else returns the sandbox to use.
func sandboxChanged(pod *corev1.Pod, st *PodState) (bool, uint32, string) {
	sb := st.NewestSandbox()
	if sb == nil {
		return true, 0, ""
	}
	ready := 0
	for _, s := range st.Sandboxes {
		if s.Ready() {
			ready++
		}
	}
	switch {
	case ready > 1, !sb.Ready(), sb.HostNetwork != pod.Spec.HostNetwork,
		!sb.HostNetwork && len(sb.IPs) == 0:
		return true, sb.Attempt + 1, ""
	}
	return false, 0, sb.ID
}

type planner struct {
	in PlanInput
	st *PodState
	a  *PodActions
}

// killStrays kills running containers that are not the newest of their
// name or that the spec no longer has.
func (p *planner) killStrays() {
	names := make(map[string]bool, len(p.in.Pod.Spec.Containers)+len(p.in.Pod.Spec.InitContainers)+len(p.in.Pod.Spec.EphemeralContainers))
	for i := range p.in.Pod.Spec.InitContainers {
		names[p.in.Pod.Spec.InitContainers[i].Name] = true
	}
	for i := range p.in.Pod.Spec.EphemeralContainers {
		names[p.in.Pod.Spec.EphemeralContainers[i].Name] = true
	}
	for i := range p.in.Pod.Spec.Containers {
		names[p.in.Pod.Spec.Containers[i].Name] = true
	}
	seen := make(map[string]bool, len(p.st.Containers))
	for _, c := range p.st.Containers {
		newest := !seen[c.Name]
		seen[c.Name] = true
		if c.Running() && (!newest || !names[c.Name]) {
			p.a.Kill = append(p.a.Kill, KillAction{ID: c.ID, Name: c.Name, Reason: "Container is not in the pod's spec or has a newer instance"})
		}
	}
}

// probeFailed returns the liveness or startup probe that failed for the
// running container c, or nil.
func (p *planner) probeFailed(spec *corev1.Container, c *ContainerState) (*corev1.Probe, string) {
	if p.in.Probes == nil {
		return nil, ""
	}
	for _, t := range [...]probe.Type{probe.Liveness, probe.Startup} {
		u, ok := p.in.Probes.Latest(p.in.Pod.UID, spec.Name, t)
		if !ok || u.Result != probe.Failure || bareID(u.ContainerID) != c.ID {
			continue
		}
		pr := spec.LivenessProbe
		if t == probe.Startup {
			pr = spec.StartupProbe
		}
		return pr, fmt.Sprintf("Container %s failed %s probe, will be restarted", spec.Name, strings.ToLower(t.String()))
	}
	return nil, ""
}

// started reports whether a running sidecar counts as started: it has no
// startup probe, or its startup probe succeeded for this container.
func (p *planner) started(spec *corev1.Container, c *ContainerState) bool {
	if spec.StartupProbe == nil || p.in.Probes == nil {
		return true
	}
	u, ok := p.in.Probes.Latest(p.in.Pod.UID, spec.Name, probe.Startup)
	return ok && u.Result == probe.Success && bareID(u.ContainerID) == c.ID
}

// heldBack reports whether crash-loop back-off holds a start of spec whose
// last exit was exited (nil if none), and adds the BackOff action if so.
func (p *planner) heldBack(spec *corev1.Container, exited *ContainerState) bool {
	if exited == nil || !exited.Exited() || p.in.CrashLoopWait == nil {
		return false
	}
	w := p.in.CrashLoopWait(CrashLoopKey(p.in.Pod, spec), exited.FinishedAt)
	if w <= 0 {
		return false
	}
	until := exited.FinishedAt.Add(w)
	if !p.in.Now.Before(until) {
		return false
	}
	p.a.BackOff = append(p.a.BackOff, BackOffAction{Name: spec.Name, Until: until,
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", w, spec.Name, p.in.Pod.Name, p.in.Pod.Namespace, p.in.Pod.UID)})
	return true
}

// restart plans a start of ref whose newest instance is c (nil if it never
// ran), unless crash-loop back-off holds it.
func (p *planner) restart(ref ContainerRef, c *ContainerState) {
	spec := ref.Spec(p.in.Pod)
	if p.heldBack(spec, c) {
		return
	}
	if c != nil && (c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN || c.Running()) {
		p.a.Kill = append(p.a.Kill, KillAction{ID: c.ID, Name: c.Name, Reason: "Container is in unknown state, will be restarted"})
	}
	p.a.Start = append(p.a.Start, ref)
}

// failed reports whether an exited or unknown container ended in failure.
func failed(c *ContainerState) bool {
	return c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN || (c.Exited() && c.ExitCode != 0) || c.Reason == "OOMKilled"
}

// keepOrRecreate handles a running container: recreate it on a hash change
// or a liveness/startup failure, else keep it. It reports whether the
// container is kept running. The replacement waits out the crash-loop
// back-off of the container's previous exit, as the kubelet's start does:
// a container killed again and again by its probe backs off as one that
// exits.
func (p *planner) keepOrRecreate(ref ContainerRef, c *ContainerState, restartable bool) bool {
	spec := ref.Spec(p.in.Pod)
	if c.Hash != HashContainer(spec) {
		p.a.Kill = append(p.a.Kill, KillAction{ID: c.ID, Name: c.Name,
			Reason: fmt.Sprintf("Container %s definition changed, will be restarted", spec.Name)})
		if !p.heldBack(spec, p.st.NewestExited(spec.Name)) {
			p.a.Start = append(p.a.Start, ref)
		}
		return false
	}
	if pr, msg := p.probeFailed(spec, c); msg != "" {
		p.a.Kill = append(p.a.Kill, KillAction{ID: c.ID, Name: c.Name, Reason: msg, Probe: pr})
		if restartable && !p.heldBack(spec, p.st.NewestExited(spec.Name)) {
			p.a.Start = append(p.a.Start, ref)
		}
		return false
	}
	p.a.Kept++
	return true
}

// initContainers plans the init containers and reports whether they are
// all done (sidecars started), so regular containers may run.
func (p *planner) initContainers() bool {
	pod := p.in.Pod
	// Once a regular container ran, run-to-completion init containers are done
	// even if their records are gone.
	regularRan := false
	for i := range pod.Spec.Containers {
		if p.st.Latest(pod.Spec.Containers[i].Name) != nil {
			regularRan = true
			break
		}
	}
	for i := range pod.Spec.InitContainers {
		spec := &pod.Spec.InitContainers[i]
		ref := ContainerRef{Init: true, Index: i}
		c := p.st.Latest(spec.Name)
		if IsSidecar(spec) {
			if c != nil && c.Running() {
				if !p.keepOrRecreate(ref, c, true) {
					return regularRan
				}
				if !p.started(spec, c) && !regularRan {
					return false
				}
				continue
			}
			p.restart(ref, c)
			if !regularRan {
				return false
			}
			continue
		}
		if regularRan {
			continue
		}
		switch {
		case c == nil || c.State == runtimeapi.ContainerState_CONTAINER_CREATED:
			p.restart(ref, c)
			return false
		case c.Running():
			if c.Hash != HashContainer(spec) {
				p.keepOrRecreate(ref, c, true)
			} else {
				p.a.Kept++
			}
			return false
		case c.Exited() && c.ExitCode == 0 && c.Reason != "OOMKilled":
			continue
		default: // failed or unknown
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
				p.a.InitFailed = true
				return false
			}
			p.restart(ref, c)
			return false
		}
	}
	return true
}

// containerPolicy is a regular container's restart policy: its own
// restartPolicy when set (ContainerRestartRules), else the pod's.
func containerPolicy(pod *corev1.Pod, spec *corev1.Container) corev1.RestartPolicy {
	if spec.RestartPolicy != nil {
		return corev1.RestartPolicy(*spec.RestartPolicy)
	}
	return pod.Spec.RestartPolicy
}

// shouldRestart decides whether a regular container that is not running
// starts again: always when it never ran, is created or unknown; after an
// exit by the first of its restartPolicyRules whose exit codes match, else by
// its restart policy (Always; OnFailure after a failure; Never not).
func shouldRestart(pod *corev1.Pod, spec *corev1.Container, c *ContainerState) bool {
	if c == nil || c.State == runtimeapi.ContainerState_CONTAINER_CREATED || c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		return true
	}
	for _, r := range spec.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := slices.Contains(r.ExitCodes.Values, c.ExitCode)
		if in == (r.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpIn) {
			return r.Action == corev1.ContainerRestartRuleActionRestart || r.Action == corev1.ContainerRestartRuleActionRestartAllContainers
		}
	}
	switch containerPolicy(pod, spec) {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return failed(c)
	}
	return true
}

// regularContainers plans the regular containers and returns how many are
// kept running.
func (p *planner) regularContainers() int {
	pod := p.in.Pod
	kept := 0
	for i := range pod.Spec.Containers {
		spec := &pod.Spec.Containers[i]
		ref := ContainerRef{Index: i}
		c := p.st.Latest(spec.Name)
		if c != nil && c.Running() {
			if p.keepOrRecreate(ref, c, containerPolicy(pod, spec) != corev1.RestartPolicyNever) {
				kept++
			}
			continue
		}
		if shouldRestart(pod, spec, c) {
			p.restart(ref, c)
		}
	}
	return kept
}

// bareID strips a "<runtime>://" prefix.
func bareID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}
