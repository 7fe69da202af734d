package eviction

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"

	"github.com/nodekit/nodekit/internal/pressure"
	"github.com/nodekit/nodekit/podsync/admission"
)

// SystemCriticalPriority is the lowest priority of a critical pod, that of
// the system-cluster-critical class.
const SystemCriticalPriority = admission.SystemCriticalPriority

// rankKey is one pod's place in a ranking: pods are ordered by k1, then
// k2, then k3, then their index in the list ranked, so a plain sort gives
// the stable order of kubelet's chain of comparisons.
type rankKey struct {
	k1, k2, k3 int64
	index      int
}

func (a rankKey) compare(b rankKey) int {
	if c := cmp.Compare(a.k1, b.k1); c != 0 {
		return c
	}
	if c := cmp.Compare(a.k2, b.k2); c != 0 {
		return c
	}
	if c := cmp.Compare(a.k3, b.k3); c != 0 {
		return c
	}
	return cmp.Compare(a.index, b.index)
}

// usageIndex maps pod UIDs to their usage in a snapshot.
type usageIndex map[types.UID]*PodUsage

func indexUsage(s *Snapshot) usageIndex {
	idx := make(usageIndex, len(s.Pods))
	for i := range s.Pods {
		idx[s.Pods[i].UID] = &s.Pods[i]
	}
	return idx
}

// diskUsage is what of u counts against a disk signal.
func diskUsage(u *PodUsage, s Signal, dedicatedImageFS bool) int64 {
	info, _ := s.info()
	root, logs, vols := u.RootfsBytes, u.LogsBytes, u.VolumeBytes
	if info.Inodes() {
		root, logs, vols = u.RootfsInodes, u.LogsInodes, u.VolumeInodes
	}
	if !dedicatedImageFS {
		return int64(root + logs + vols)
	}
	if info.Source == pressure.SourceImageFS {
		return int64(root)
	}
	return int64(logs + vols)
}

// podRequest is the pod's request of name as the scheduler counts it: the
// pod-level request when set; else the larger of the regular containers
// plus sidecars and the largest init container (plus the sidecars started
// before it); plus the pod's overhead. It allocates nothing, unlike
// component-helpers' PodRequests, which the ranking would call for every
// pod on every eviction.
func podRequest(pod *corev1.Pod, name corev1.ResourceName) int64 {
	if r := pod.Spec.Resources; r != nil {
		if q, ok := r.Requests[name]; ok {
			return q.Value()
		}
	}
	value := func(l corev1.ResourceList) int64 {
		if q, ok := l[name]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, sidecars, initMax int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		v := value(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += v
			initMax = max(initMax, sidecars)
			continue
		}
		initMax = max(initMax, sidecars+v)
	}
	for i := range pod.Spec.Containers {
		sum += value(pod.Spec.Containers[i].Resources.Requests)
	}
	return max(sum+sidecars, initMax) + value(pod.Spec.Overhead)
}

// Rank orders pods for an eviction driven by signal, first to evict first,
// by kubelet's rules:
//
//   - memory signals: pods whose working set exceeds their memory request
//     first, then lower priority first, then the larger use above the
//     request first;
//   - nodefs and imagefs signals: pods whose disk use exceeds their
//     ephemeral-storage request first (for inodes, any use does), then
//     lower priority first, then the larger use above the request first;
//   - pid.available: lower priority first, then more processes first.
//
// A pod without usage in the snapshot goes before those with usage at
// every step that needs usage. Pods that tie keep their order. Rank sorts
// pods in place; critical pods are ranked too (the manager skips them).
func Rank(pods []*corev1.Pod, signal Signal, snap *Snapshot) {
	rankWith(pods, signal, snap, indexUsage(snap))
}

func rankWith(pods []*corev1.Pod, signal Signal, snap *Snapshot, idx usageIndex) {
	info, ok := signal.info()
	if !ok {
		return
	}
	memory, disk := info.Memory(), info.Disk()
	keys := make([]rankKey, len(pods))
	for i, p := range pods {
		prio := int64(schedcorev1.PodPriority(p))
		u, found := idx[p.UID]
		var usage, request int64
		switch {
		case memory:
			request = podRequest(p, corev1.ResourceMemory)
			if found {
				usage = int64(u.MemoryWorkingSetBytes)
			}
		case disk:
			if info.Resource == corev1.ResourceEphemeralStorage {
				request = podRequest(p, corev1.ResourceEphemeralStorage)
			}
			if found {
				usage = diskUsage(u, signal, snap.DedicatedImageFS)
			}
		default:
			if found {
				usage = int64(u.Processes)
			}
		}
		k := rankKey{index: i}
		switch {
		case (memory || disk) && !found:
			// No stats: first at the first step, tied at the others.
			k.k1, k.k2 = 0, prio
		case memory || disk:
			k.k1 = 2
			if usage > request {
				k.k1 = 1
			}
			k.k2, k.k3 = prio, -(usage - request)
		case !found:
			k.k1, k.k2 = prio, 0
		default:
			k.k1, k.k2, k.k3 = prio, 1, -usage
		}
		keys[i] = k
	}
	slices.SortFunc(keys, rankKey.compare)
	orig := slices.Clone(pods)
	for i := range keys {
		pods[i] = orig[keys[i].index]
	}
}

// cmpTrueFirst orders true before false.
func cmpTrueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}
