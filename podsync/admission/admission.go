package admission

import (
	"fmt"
	"net"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/podres"
	"github.com/nodekit/nodekit/podsource"
)

// Admitter decides whether a pod new to the node may run there, given the
// pods already admitted that still run or are stopping (active). It is
// called for one pod at a time, in the order the pods are to be admitted.
type Admitter interface {
	Admit(pod *corev1.Pod, active []*corev1.Pod) Result
}

// AdmitterFunc adapts a function to Admitter.
type AdmitterFunc func(pod *corev1.Pod, active []*corev1.Pod) Result

// Admit calls f.
func (f AdmitterFunc) Admit(pod *corev1.Pod, active []*corev1.Pod) Result { return f(pod, active) }

var (
	_ Admitter = AdmitterFunc(nil)
	_ Admitter = (*Predicates)(nil)
)

// Result is an admission decision. A rejected pod gets phase Failed with
// Reason and the status message "Pod was rejected: " + Message, as kubelet
// writes it, and a Warning event with Reason and Message.
//
// A pod admitted by preemption has Preempt set: the active pods that must
// be stopped to make room for it (podsync's Engine stops them, each with
// PreemptedStatus, and starts the pod once they are stopped); Reason and
// Message then say what it lacked.
type Result struct {
	Admit   bool
	Reason  string
	Message string
	Preempt []*corev1.Pod
}

// Admitted is the Result of a pod that may run.
var Admitted = Result{Admit: true}

// Kubelet's rejection reasons.
const (
	ReasonInvalidNodeInfo                    = "InvalidNodeInfo"
	ReasonPodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonPodOSNotSupported                  = "PodOSNotSupported"
	// ReasonOutOfPrefix + the resource name: OutOfcpu, OutOfmemory,
	// OutOfephemeral-storage, OutOfpods, OutOfexample.com/gpu.
	ReasonOutOfPrefix = "OutOf"
	ReasonOutOfCPU    = "OutOfcpu"
	ReasonOutOfMemory = "OutOfmemory"
	ReasonOutOfPods   = "OutOfpods"
	// The scheduler's plugin names, which kubelet uses as reasons.
	ReasonNodeAffinity    = "NodeAffinity"
	ReasonNodeName        = "NodeName"
	ReasonNodePorts       = "NodePorts"
	ReasonTaintToleration = "TaintToleration"
)

// The scheduler's failure texts for its plugins, which kubelet puts in the
// message after "Predicate <name> failed: ".
const (
	nodeAffinityText    = "node(s) didn't match Pod's node affinity/selector"
	nodeNameText        = "node(s) didn't match the requested node name"
	nodePortsText       = "node(s) didn't have free ports for the requested pod ports"
	taintTolerationText = "node(s) had taints that the pod didn't tolerate"
)

// Options configure Predicates.
type Options struct {
	// Node returns the node as last known: its name, labels, taints and
	// status.allocatable. Required. An error rejects the pod with
	// InvalidNodeInfo, as kubelet does when it cannot get its node.
	Node func() (*corev1.Node, error)
	// OS is the node's operating system, compared with spec.os.name and the
	// kubernetes.io/os pod label. Default runtime.GOOS.
	OS string
}

// Predicates is kubelet's predicate admission (pkg/kubelet/lifecycle): the
// OS checks, then the scheduler's general predicates as kubelet runs them
// (resources, node affinity, node name, host ports) and NoExecute taints for
// pods that are not static; the first failure is the reason. A critical pod
// (IsCritical) that fails on resources alone is admitted by preemption
// (Result.Preempt, chosen by Victims), or rejected with
// UnexpectedAdmissionError when no set of preemptable pods frees enough.
type Predicates struct {
	o Options

	// requests holds each active pod's effective requests, by UID, for
	// the very pod object they were summed from: the pods an agent's
	// parts hand each other are never modified, so the sums of a node's
	// active pods are taken once, not at every admission.
	mu       sync.Mutex
	requests map[types.UID]podRequests
}

type podRequests struct {
	pod  *corev1.Pod
	list corev1.ResourceList
}

// requestsOf returns pod's effective requests (not to be modified). The
// caller holds p.mu.
func (p *Predicates) requestsOf(pod *corev1.Pod) corev1.ResourceList {
	if r, ok := p.requests[pod.UID]; ok && r.pod == pod {
		return r.list
	}
	l := podres.Requests(pod, resourcehelper.PodResourcesOptions{})
	if p.requests == nil {
		p.requests = map[types.UID]podRequests{}
	}
	p.requests[pod.UID] = podRequests{pod: pod, list: l}
	return l
}

// forgetRequests drops the sums of pods no longer active once they are
// as many as the active ones. The caller holds p.mu.
func (p *Predicates) forgetRequests(active []*corev1.Pod) {
	if len(p.requests) <= 2*len(active)+16 {
		return
	}
	keep := make(map[types.UID]bool, len(active))
	for _, a := range active {
		keep[a.UID] = true
	}
	for uid := range p.requests {
		if !keep[uid] {
			delete(p.requests, uid)
		}
	}
}

// New checks o and returns the predicates.
func New(o Options) (*Predicates, error) {
	if o.Node == nil {
		return nil, optcheck.Required("admission: Options.Node")
	}
	if o.OS == "" {
		o.OS = goruntime.GOOS
	}
	return &Predicates{o: o}, nil
}

// Admit runs the predicates on pod against the node and the active pods.
func (p *Predicates) Admit(pod *corev1.Pod, active []*corev1.Pod) Result {
	node, err := p.o.Node()
	if err != nil || node == nil {
		return Result{Reason: ReasonInvalidNodeInfo, Message: "Kubelet cannot get node info."}
	}
	// The checks that no eviction could help come first.
	if os, ok := pod.Labels[corev1.LabelOSStable]; ok && os != p.o.OS {
		return Result{Reason: ReasonPodOSSelectorNodeLabelDoesNotMatch,
			Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != p.o.OS {
		return Result{Reason: ReasonPodOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SupplementalGroupsPolicy != nil && *sc.SupplementalGroupsPolicy == corev1.SupplementalGroupsPolicyStrict &&
		(node.Status.Features == nil || node.Status.Features.SupplementalGroupsPolicy == nil || !*node.Status.Features.SupplementalGroupsPolicy) {
		return Result{Reason: ReasonSupplementalGroupsPolicyNotSupported,
			Message: fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", corev1.SupplementalGroupsPolicyStrict)}
	}
	p.mu.Lock()
	short := shortages(pod, node, active, p.requestsOf)
	p.forgetRequests(active)
	p.mu.Unlock()
	critical := IsCritical(pod)
	if len(short) > 0 && !critical {
		return short[0].result()
	}
	// A critical pod that lacks resources and nothing else makes room by
	// preemption; any other failure is its reason.
	if r := otherPredicates(pod, node, active); !r.Admit || len(short) == 0 {
		return r
	}
	needs := make([]Need, len(short))
	for i, s := range short {
		needs[i] = Need{Resource: s.name, Amount: s.missing()}
	}
	victims, err := Victims(pod, active, needs)
	if err != nil {
		return Result{Reason: ReasonUnexpectedAdmissionError,
			Message: "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: " + err.Error()}
	}
	r := short[0].result()
	r.Admit, r.Preempt = true, victims
	return r
}

// otherPredicates are the predicates after the resources: node affinity,
// node name, host ports and, for pods that are not static, NoExecute
// taints.
func otherPredicates(pod *corev1.Pod, node *corev1.Node, active []*corev1.Pod) Result {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return predicateFailure(ReasonNodeAffinity, nodeAffinityText)
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return predicateFailure(ReasonNodeName, nodeNameText)
	}
	if portsConflict(pod, active) {
		return predicateFailure(ReasonNodePorts, nodePortsText)
	}
	if !podsource.IsStaticPod(pod) {
		noExecute := func(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }
		if _, untolerated := schedcorev1.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noExecute, false); untolerated {
			return predicateFailure(ReasonTaintToleration, taintTolerationText)
		}
	}
	return Admitted
}

func predicateFailure(name, text string) Result {
	return Result{Reason: name, Message: fmt.Sprintf("Predicate %s failed: %s", name, text)}
}

// insufficient is kubelet's message for a resource that does not fit.
func insufficient(name corev1.ResourceName, requested, used, capacity int64) Result {
	return Result{Reason: ReasonOutOfPrefix + string(name),
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, requested, used, capacity)}
}

// shortage is one resource the node lacks for a pod: what the pod
// requests, what the active pods use and the node's allocatable, cpu in
// millicores and the rest in units.
type shortage struct {
	name                      corev1.ResourceName
	requested, used, capacity int64
}

// missing is how much more of the resource would have to be freed.
func (s shortage) missing() int64 { return s.requested - (s.capacity - s.used) }

func (s shortage) result() Result { return insufficient(s.name, s.requested, s.used, s.capacity) }

// request is what pod asks of resource name, as admission counts it: 1 pod,
// cpu in millicores, the rest in units, from the pod's effective requests
// (containers, the largest init container, sidecars, overhead).
func request(pod *corev1.Pod, name corev1.ResourceName) int64 {
	if name == corev1.ResourcePods {
		return 1
	}
	return quantity(podres.Requests(pod, resourcehelper.PodResourcesOptions{}), name)
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// shortages checks the pod count, then cpu (millicores), memory, ephemeral
// storage and the other resources the pod requests against the node's
// allocatable minus what the active pods request, and returns every
// resource that does not fit, in that order. Extended resources the node
// does not list are not checked (they may be cluster-level).
func shortages(pod *corev1.Pod, node *corev1.Node, active []*corev1.Pod, requests func(*corev1.Pod) corev1.ResourceList) []shortage {
	alloc := node.Status.Allocatable
	var out []shortage
	if maxPods := alloc.Pods().Value(); int64(len(active))+1 > maxPods {
		out = append(out, shortage{name: corev1.ResourcePods, requested: 1, used: int64(len(active)), capacity: maxPods})
	}
	want := podres.Requests(pod, resourcehelper.PodResourcesOptions{})
	used := corev1.ResourceList{}
	for _, a := range active {
		for name, q := range requests(a) {
			u := used[name]
			u.Add(q)
			used[name] = u
		}
	}
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	var other []corev1.ResourceName
	for name, q := range want {
		if slices.Contains(names, name) || name == corev1.ResourcePods || q.IsZero() {
			continue
		}
		if _, listed := alloc[name]; !listed && isExtended(name) {
			continue
		}
		other = append(other, name)
	}
	slices.Sort(other)
	for _, name := range append(names, other...) {
		w := quantity(want, name)
		if w <= 0 {
			continue
		}
		if u, c := quantity(used, name), quantity(alloc, name); w > c-u {
			out = append(out, shortage{name: name, requested: w, used: u, capacity: c})
		}
	}
	return out
}

// isExtended reports whether name is an extended resource: outside the
// kubernetes.io domain and not requests.*.
func isExtended(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.HasPrefix(s, "requests.") {
		return false
	}
	domain, _, _ := strings.Cut(s, "/")
	return domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

type hostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

// hostPorts are the host ports pod asks for: those of its regular
// containers and its restartable init containers (sidecars).
func hostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for i := range cs {
			if sidecarsOnly && (cs[i].RestartPolicy == nil || *cs[i].RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range cs[i].Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
				if hp.ip == "" {
					hp.ip = net.IPv4zero.String()
				}
				if hp.protocol == "" {
					hp.protocol = corev1.ProtocolTCP
				}
				out = append(out, hp)
			}
		}
	}
	add(pod.Spec.InitContainers, true)
	add(pod.Spec.Containers, false)
	return out
}

// portsConflict reports whether a host port of pod is taken by an active
// pod: same protocol and port, and the same IP or either the wildcard.
func portsConflict(pod *corev1.Pod, active []*corev1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return false
	}
	wildcard := net.IPv4zero.String()
	for _, a := range active {
		for _, u := range hostPorts(a) {
			for _, w := range want {
				if w.port == u.port && w.protocol == u.protocol && (w.ip == u.ip || w.ip == wildcard || u.ip == wildcard) {
					return true
				}
			}
		}
	}
	return false
}

// Status is the status kubelet writes for a pod it rejected: phase Failed,
// the reason, "Pod was rejected: " + the message, and the pod's QoS class.
func (r Result) Status(qos corev1.PodQOSClass) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, Reason: r.Reason, Message: "Pod was rejected: " + r.Message, QOSClass: qos}
}
