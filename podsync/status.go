package podsync

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podres"
	"github.com/nodekit/nodekit/podsync/admission"
)

// Waiting reasons the kubelet reports and podsync with it.
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonPodInitializing            = "PodInitializing"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
	ReasonPostStartHookError         = "PostStartHookError"
	ReasonContainerStatusUnknown     = "ContainerStatusUnknown"
)

// Waiting is why a container is not running, as the last sync found it.
type Waiting struct {
	Reason, Message string
}

// StatusInput is everything GeneratePodStatus looks at.
type StatusInput struct {
	// Pod is the desired pod; Pod.Status is the status last known (a
	// terminal phase in it is kept, and so are condition transition times).
	Pod   *corev1.Pod
	State *PodState
	// Waiting: reasons from the last sync, by container name.
	Waiting map[string]Waiting
	// Probes fills Started and Ready; nil: started and ready once running.
	Probes ProbeResults
	// RuntimeName prefixes container IDs ("containerd://…").
	RuntimeName string
	HostIPs     []string
	Now         time.Time
	// Terminated: the pod's containers were all stopped for good (the pod
	// worker finished terminating it).
	Terminated bool
}

func isTerminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// GeneratePodStatus computes the pod's status as the kubelet does: phase,
// conditions, container and init container statuses, IPs, start time and
// QoS class. Its times are whole seconds, as the API keeps them (and the
// kubelet's status manager reports them). It does no I/O.
func GeneratePodStatus(in StatusInput) corev1.PodStatus {
	pod, old := in.Pod, &in.Pod.Status
	st := in.State
	if st == nil {
		st = &PodState{}
	}
	// The generation seen, on the status and on each condition the node
	// owns, as the kubelet writes it (PodObservedGenerationTracking, GA).
	s := corev1.PodStatus{QOSClass: admission.QOSClass(pod), StartTime: old.StartTime, ObservedGeneration: pod.Generation}
	s.Resources, s.AllocatedResources = podResources(pod)
	if s.StartTime == nil {
		t := second(in.Now)
		s.StartTime = &t
	}
	for _, ip := range in.HostIPs {
		s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
	}
	if len(in.HostIPs) > 0 {
		s.HostIP = in.HostIPs[0]
	}
	ips := in.HostIPs
	sb := st.NewestSandbox()
	if !pod.Spec.HostNetwork {
		ips = nil
		if sb != nil {
			ips = sb.IPs
		}
	}
	for _, ip := range ips {
		s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		s.PodIP = ips[0]
	} else if !anySandboxReady(st) {
		// A stopped sandbox has no address any more (the runtime
		// reports none once its network namespace is gone): the pod
		// keeps the one it had, as the kubelet keeps it for pods whose
		// sandboxes have all exited.
		s.PodIP, s.PodIPs = old.PodIP, old.PodIPs
	}
	def := ReasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		def = ReasonPodInitializing
	}
	restarts := pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	s.InitContainerStatuses = containerStatuses(in, st, pod.Spec.InitContainers, def, restarts)
	s.ContainerStatuses = containerStatuses(in, st, pod.Spec.Containers, def, restarts)
	s.EphemeralContainerStatuses = containerStatuses(in, st, ephemeralSpecs(pod), def, false)
	if in.Probes != nil {
		in.Probes.UpdatePodStatus(pod, &s)
	} else {
		defaultStartedReady(pod, &s)
	}
	if in.Terminated {
		markTerminated(pod, &s)
	}
	s.Phase = podPhase(pod, &s, in.Terminated)
	if isTerminal(old.Phase) {
		s.Phase = old.Phase
	}
	if isTerminal(s.Phase) {
		for i := range s.ContainerStatuses {
			s.ContainerStatuses[i].Ready = false
		}
	}
	s.Conditions = conditions(in, &s, st)
	if s.Phase == corev1.PodFailed && old.Reason != "" {
		s.Reason, s.Message = old.Reason, old.Message
	}
	return s
}

// podResources returns the pod-level resources the kubelet reports
// (InPlacePodLevelResourcesVerticalScaling): the pod's effective requests
// and limits (its containers' and its own), and its requests as allocated.
func podResources(pod *corev1.Pod) (*corev1.ResourceRequirements, corev1.ResourceList) {
	if noResources(pod) {
		// What the sums below come to, without computing them.
		return &corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}, corev1.ResourceList{}
	}
	opts := resourcehelper.PodResourcesOptions{}
	res := pod.Spec.Resources.DeepCopy()
	if res == nil {
		res = &corev1.ResourceRequirements{}
	}
	res.Requests = podres.Requests(pod, opts)
	res.Limits = podres.Limits(pod, opts)
	return res, res.Requests.DeepCopy()
}

// noResources reports whether neither pod nor any of its containers asks
// for or limits any resource.
func noResources(pod *corev1.Pod) bool {
	if pod.Spec.Resources != nil || len(pod.Spec.Overhead) > 0 {
		return false
	}
	for _, l := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range l {
			if len(l[i].Resources.Requests) > 0 || len(l[i].Resources.Limits) > 0 {
				return false
			}
		}
	}
	return true
}

func anySandboxReady(st *PodState) bool {
	for _, sb := range st.Sandboxes {
		if sb.Ready() {
			return true
		}
	}
	return false
}

// ephemeralSpecs returns the pod's ephemeral containers as Containers.
func ephemeralSpecs(pod *corev1.Pod) []corev1.Container {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		out[i] = corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	return out
}

func defaultStartedReady(pod *corev1.Pod, s *corev1.PodStatus) {
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		r := cs.State.Running != nil
		cs.Started, cs.Ready = &r, r
	}
	for i := range s.InitContainerStatuses {
		cs := &s.InitContainerStatuses[i]
		r := cs.State.Running != nil
		cs.Started = &r
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			cs.Ready = r
		} else {
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
	}
}

// markTerminated defaults the statuses of a pod that is done, as the
// kubelet's status manager does when it terminates a pod: once the pod has
// initialized, every regular container that does not show an exit is
// ContainerStatusUnknown; of the init containers, all but the trailing ones
// that never started (the first one always) are. A pod whose init
// containers never completed keeps its regular containers waiting
// (PodInitializing).
func markTerminated(pod *corev1.Pod, s *corev1.PodStatus) {
	if podInitialized(pod, s) {
		markUnknown(s.ContainerStatuses)
	}
	markUnknown(s.InitContainerStatuses[:initStarted(s.InitContainerStatuses)])
	markUnknown(s.EphemeralContainerStatuses)
}

// podInitialized reports whether the status shows that the pod got past
// its init containers: it has none, a regular container has run
// (anyRegularStarted), or the last init container completed (a sidecar:
// runs and has started).
func podInitialized(pod *corev1.Pod, s *corev1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 || anyRegularStarted(s) {
		return true
	}
	n := len(s.InitContainerStatuses)
	if n == 0 || n > len(pod.Spec.InitContainers) {
		return false
	}
	cs := s.InitContainerStatuses[n-1]
	if IsSidecar(&pod.Spec.InitContainers[n-1]) {
		return cs.State.Running != nil && cs.Started != nil && *cs.Started
	}
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && t.ExitCode == 0 {
			return true
		}
	}
	return false
}

// initStarted returns how many of the init container statuses, from the
// first, precede the trailing ones that never left waiting; at least one
// when there are any.
func initStarted(css []corev1.ContainerStatus) int {
	for i := len(css) - 1; i >= 0; i-- {
		if hasRun(&css[i]) {
			return i + 1
		}
	}
	return min(1, len(css))
}

// markUnknown turns containers that still look alive in a pod that is done
// into ContainerStatusUnknown, exit code 137.
func markUnknown(css []corev1.ContainerStatus) {
	for i := range css {
		cs := &css[i]
		if cs.State.Terminated != nil {
			continue
		}
		if cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil {
			cs.State = corev1.ContainerState{Terminated: cs.LastTerminationState.Terminated}
			cs.LastTerminationState = corev1.ContainerState{}
			continue
		}
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: ReasonContainerStatusUnknown,
			Message: "The container could not be located when the pod was terminated"}}
	}
}

func (in *StatusInput) containerID(c *ContainerState) string {
	name := in.RuntimeName
	if name == "" {
		name = "containerd"
	}
	return name + "://" + c.ID
}

func (in *StatusInput) terminated(c *ContainerState) *corev1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = "Completed"
		if c.ExitCode != 0 {
			reason = "Error"
		}
	}
	return &corev1.ContainerStateTerminated{ExitCode: c.ExitCode, Reason: reason, Message: c.Message,
		StartedAt: second(c.StartedAt), FinishedAt: second(c.FinishedAt), ContainerID: in.containerID(c)}
}

// containerStatuses: restarts tells whether the pod restarts a container
// that failed (a failed start among them).
func containerStatuses(in StatusInput, st *PodState, specs []corev1.Container, def string, restarts bool) []corev1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(specs))
	for i := range specs {
		spec := &specs[i]
		cs := &out[i]
		cs.Name, cs.Image = spec.Name, spec.Image
		cs.VolumeMounts = volumeMountStatuses(spec)
		w, hasW := in.Waiting[spec.Name]
		c := st.Latest(spec.Name)
		if c == nil {
			if !hasW {
				w.Reason = def
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			continue
		}
		cs.ContainerID, cs.ImageID, cs.RestartCount = in.containerID(c), c.ImageRef, int32(c.RestartCount)
		// A container the runtime has: the resources it was given (the
		// spec's; nodekit does no in-place resize) and its requests as
		// allocated, as the kubelet reports them.
		cs.Resources = spec.Resources.DeepCopy()
		cs.AllocatedResources = spec.Resources.Requests.DeepCopy()
		cs.User = c.User.DeepCopy()
		if c.Image != "" {
			cs.Image = c.Image
		}
		if p := st.previous(spec.Name); p != nil && p.Exited() {
			cs.LastTerminationState.Terminated = in.terminated(p)
		}
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: second(c.StartedAt)}
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			if c.CutShort && restarts && c.Hash == HashContainer(spec) {
				// To be replaced at the same restart count: not an
				// exit (which would make the pod Running until the
				// replacement, then Pending again).
				if !hasW {
					w.Reason = def
				}
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			} else if hasW {
				// Waiting to restart (back-off, a failed create): the exit is the last state.
				cs.LastTerminationState.Terminated = in.terminated(c)
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			} else {
				cs.State.Terminated = in.terminated(c)
			}
		default:
			if !hasW {
				w.Reason = ReasonContainerCreating
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
	}
	return out
}

// volumeMountStatuses reports a container's volume mounts as the kubelet
// does (RecursiveReadOnlyMounts, GA): name, path and read-only, and for a
// read-only mount whether it is recursive, which nodekit's never are
// (podsync/cri refuses recursiveReadOnly Enabled and mounts IfPossible
// read-only alone).
func volumeMountStatuses(spec *corev1.Container) []corev1.VolumeMountStatus {
	if len(spec.VolumeMounts) == 0 {
		return nil
	}
	out := make([]corev1.VolumeMountStatus, len(spec.VolumeMounts))
	for i, m := range spec.VolumeMounts {
		out[i] = corev1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
		if m.ReadOnly {
			rro := corev1.RecursiveReadOnlyDisabled
			out[i].RecursiveReadOnly = &rro
		}
	}
	return out
}

// podPhase is the kubelet's getPhase.
func podPhase(pod *corev1.Pod, s *corev1.PodStatus, terminated bool) corev1.PodPhase {
	pendingInit := 0
	for i, cs := range s.InitContainerStatuses {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			if cs.State.Running == nil && !anyRegularStarted(s) {
				pendingInit++
			}
			continue
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
		case cs.State.Terminated != nil:
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
				return corev1.PodFailed
			}
			pendingInit++
		default:
			if !anyRegularStarted(s) {
				pendingInit++
			}
		}
	}
	var running, waiting, stopped, succeeded, unknown int
	for _, cs := range s.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			stopped++
		case cs.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
	}
	switch {
	case pendingInit > 0 && running == 0:
		return corev1.PodPending
	case waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminated {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		switch {
		case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// anyRegularStarted reports whether a regular container has run: it runs,
// shows an exit, or waits to restart after one (regularStarted leaves out
// the last).
func anyRegularStarted(s *corev1.PodStatus) bool {
	for i := range s.ContainerStatuses {
		if hasRun(&s.ContainerStatuses[i]) {
			return true
		}
	}
	return false
}

// hasRun reports whether a container has run: it is not waiting, or it
// waits after an exit.
func hasRun(cs *corev1.ContainerStatus) bool {
	return cs.State.Waiting == nil || cs.LastTerminationState.Terminated != nil
}

// Condition reasons and messages the kubelet writes.
const (
	ReasonPodSandboxNotReady       = "PodSandboxNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// sandboxNotReady says why the pod is not ready to start containers (the
// PodReadyToStartContainers message), "" when it is: the reasons the
// planner makes a new sandbox for.
func sandboxNotReady(pod *corev1.Pod, st *PodState, terminated bool) string {
	sb := st.NewestSandbox()
	if sb == nil {
		return "no pod sandbox exists"
	}
	ready := 0
	for _, s := range st.Sandboxes {
		if s.Ready() {
			ready++
		}
	}
	switch {
	case ready > 1:
		return "multiple pod sandboxes are ready and need to be reconciled"
	case !sb.Ready() || terminated:
		return "pod sandbox is not ready"
	case sb.HostNetwork != pod.Spec.HostNetwork:
		return "network namespace mode changed and sandbox needs to be recreated"
	case !pod.Spec.HostNetwork && len(sb.IPs) == 0:
		return "pod sandbox has no IP address"
	}
	return ""
}

// regularStarted reports whether a regular container runs or shows an exit.
func regularStarted(s *corev1.PodStatus) bool {
	for _, cs := range s.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

func conditions(in StatusInput, s *corev1.PodStatus, st *PodState) []corev1.PodCondition {
	pod := in.Pod
	// The five the node owns and those others own, in an array of their
	// length: a node holds one of these per pod.
	others := 0
	for _, c := range pod.Status.Conditions {
		if !generatedCondition(c.Type) {
			others++
		}
	}
	conds := make([]corev1.PodCondition, 0, 5+others)
	// add adds condition t, True when ok; reason and message are kept as
	// given either way.
	add := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: pod.Generation}
		if ok {
			c.Status = corev1.ConditionTrue
		}
		c.LastTransitionTime = second(in.Now)
		for _, o := range pod.Status.Conditions {
			if o.Type == t && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		conds = append(conds, c)
	}
	if msg := sandboxNotReady(pod, st, in.Terminated); msg != "" {
		add(corev1.PodReadyToStartContainers, false, ReasonPodSandboxNotReady, msg)
	} else {
		add(corev1.PodReadyToStartContainers, true, "", "")
	}

	var notInit []string
	for i, cs := range s.InitContainerStatuses {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			if cs.Started == nil || !*cs.Started {
				notInit = append(notInit, cs.Name)
			}
		} else if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			notInit = append(notInit, cs.Name)
		}
	}
	switch {
	case s.Phase == corev1.PodSucceeded:
		add(corev1.PodInitialized, true, ReasonPodCompleted, "")
	case regularStarted(s) || len(notInit) == 0:
		add(corev1.PodInitialized, true, "", "")
	default:
		add(corev1.PodInitialized, false, ReasonContainersNotInitialized, unreadyMessage("containers with incomplete status", notInit))
	}

	var notReady []string
	for i, cs := range s.InitContainerStatuses {
		if IsSidecar(&pod.Spec.InitContainers[i]) && !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	for _, cs := range s.ContainerStatuses {
		if !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	reason, msg := ReasonContainersNotReady, unreadyMessage("containers with unready status", notReady)
	switch s.Phase {
	case corev1.PodSucceeded:
		reason, msg = ReasonPodCompleted, ""
	case corev1.PodFailed:
		reason, msg = ReasonPodFailed, ""
	}
	ready := len(notReady) == 0 && !isTerminal(s.Phase)
	if ready {
		reason, msg = "", ""
	}
	add(corev1.ContainersReady, ready, reason, msg)

	// Each gate not True, in the kubelet's words.
	var gates []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *corev1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				found = &pod.Status.Conditions[i]
				break
			}
		}
		switch {
		case found == nil:
			gates = append(gates, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case found.Status != corev1.ConditionTrue:
			gates = append(gates, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), found.Status))
		}
	}
	switch {
	case !ready:
		add(corev1.PodReady, false, reason, msg)
	case len(gates) > 0:
		add(corev1.PodReady, false, ReasonReadinessGatesNotReady, strings.Join(gates, ", "))
	default:
		add(corev1.PodReady, true, "", "")
	}
	// PodScheduled is True on a pod the node runs, written with the
	// generation seen as the kubelet writes it (the scheduler's own, or
	// none for a static pod, is replaced); conditions others own (readiness
	// gates, DisruptionTarget, …) are kept.
	add(corev1.PodScheduled, true, "", "")
	for _, c := range pod.Status.Conditions {
		if !generatedCondition(c.Type) {
			conds = append(conds, c)
		}
	}
	return conds
}

// generatedCondition reports whether conditions makes condition t (the
// API's copy of it is replaced).
func generatedCondition(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled:
		return true
	}
	return false
}

// unreadyMessage lists names in the pod spec's order (sidecars first), as
// the kubelet does.
func unreadyMessage(prefix string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return prefix + ": [" + strings.Join(names, " ") + "]"
}

// second is t to the second, as the API keeps a time (metav1.Time's
// RFC 3339): a zero t stays zero.
func second(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t.Truncate(time.Second))
}
