// Package admission decides, as kubelet does, whether a pod new to the node
// may run there.
//
// Admitter is the seam: Admit(pod, active) returns a Result, admitted or
// rejected with kubelet's reason and message. podsync's Engine calls it
// (podsync.Options.Admit) for every pod new to it, oldest first by creation
// time as kubelet sorts its additions, with the pods it admitted before that
// still run or are stopping; a rejected pod never runs: its status becomes
// Result.Status (phase Failed, the reason, "Pod was rejected: " and the
// message) and a Warning event carries the reason.
//
// Predicates is kubelet's predicate admission (pkg/kubelet/lifecycle), the
// first failure winning:
//
//	PodOSSelectorNodeLabelDoesNotMatch  the pod's kubernetes.io/os label is not the node's OS
//	PodOSNotSupported                   spec.os.name is not the node's OS
//	OutOfpods                           the active pods already fill allocatable pods (max-pods)
//	OutOfcpu, OutOfmemory,              the pod's requests (containers, the largest init
//	OutOfephemeral-storage,             container, sidecars, overhead; pod-level requests
//	OutOf<resource>                     when set) exceed allocatable minus the active pods'
//	NodeAffinity                        nodeSelector or required node affinity does not match the node's labels
//	NodeName                            spec.nodeName is another node
//	NodePorts                           a host port (protocol, IP, port) is taken by an active pod
//	TaintToleration                     a NoExecute taint is not tolerated (not checked for static pods)
//	InvalidNodeInfo                     the node is not known (Options.Node failed)
//
// A critical pod (IsCritical: static, mirror, or priority at least
// SystemCriticalPriority) that fails on resources alone is admitted by
// preemption, as by the kubelet's critical-pod handler: Victims chooses the
// active pods to stop (Preemptable ones; BestEffort, then Burstable, then
// Guaranteed, nearest to what is missing), Result.Preempt names them, and
// podsync's Engine stops them with PreemptedStatus before the pod starts.
// When not even all of them would free enough, the pod is rejected with the
// kubelet's UnexpectedAdmissionError.
//
// Resource messages are kubelet's ("Node didn't have enough resource: cpu,
// requested: 1500, used: 600, capacity: 2000", cpu in millicores, others in
// units); predicate messages are "Predicate NodeAffinity failed: node(s)
// didn't match Pod's node affinity/selector" and the like. Extended
// resources the node does not list are not checked, as kubelet leaves them
// to cluster-level allocation.
//
// The kubelet's other admit handlers that nodekit has, each an Admitter,
// chained by nodekit.NewPodHalf in the kubelet's order (eviction, Sysctls,
// Predicates, AppArmor, Unsupported):
//
//	SysctlForbidden                       Sysctls: a sysctl neither safe (SafeSysctls, by kernel release) nor allowed, or of a namespace shared with the host
//	SupplementalGroupsPolicyNotSupported  Predicates: supplementalGroupsPolicy Strict on a node whose status lacks the feature
//	AppArmor                              AppArmor: a profile other than Unconfined on a host without AppArmor, or a Localhost profile without a name
//	PodFeatureUnsupported                 Unsupported: a field nodekit does not implement (UnsupportedField)
//
// # Nothing silently ignored
//
// Every field of PodSpec, Container, the security contexts, volume mounts,
// resources, lifecycle and volume sources is classified in this package's
// table (fields.go) as implemented, refused or not the node's concern, and
// a test walks the API types to fail on any field it does not name.
// Refused fields are rejected with PodFeatureUnsupported and a message
// naming them ("spec.resourceClaims is not supported by this node:
// nodekit does not implement dynamic resource allocation"). podsync/cri checks the
// same (UnsupportedField) before it creates a container, so a pod admitted
// without Unsupported, or an ephemeral container added later, fails with
// CreateContainerConfigError instead.
//
// # Limits
//
// Topology and resource managers and node shutdown are not here; an agent
// can chain its own Admitter before or after these. Kubelet's first
// handler, the rejection of pods under node pressure, is podsync/eviction's
// Manager.Admit (an Admitter) and AdmitUnderPressure. An Admitter other
// than the Engine that calls Predicates must stop Result.Preempt's pods
// itself before running an admitted pod.
//
// # Differences from the kubelet
//
//   - The kubelet stops preemption victims one after the other, each kill
//     blocking its admission; the Engine stops them together.
//   - AppArmor checks pods without a phase too (static pods), which the
//     kubelet lets through to a runtime that drops the profile on a host
//     without AppArmor.
//   - Unsupported refuses fields the kubelet implements (the list above):
//     nodekit has no dynamic resource allocation, block, persistent or
//     network volumes, hugetlbfs,
//     recursive read-only mounts or the alpha features named, so such pods
//     fail at once, naming the field, instead of running without it.
package admission
