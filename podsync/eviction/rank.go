package eviction

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"

	"github.com/nodekit/nodekit/podsource"
)

// IsCritical reports whether kubelet never evicts pod: a static pod, a
// mirror pod, or one whose priority is at least system-critical
// (2000000000).
func IsCritical(pod *corev1.Pod) bool {
	if podsource.IsStaticPod(pod) || podsource.IsMirrorPod(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// SystemCriticalPriority is the lowest priority of a critical pod, that of
// the system-cluster-critical class.
const SystemCriticalPriority = 2000000000

// rankKey is what ranking compares for one pod.
type rankKey struct {
	index    int   // in the pods ranked: the last tie-breaker
	found    bool  // the pod has usage in the snapshot
	usage    int64 // in the signal's unit
	request  int64
	priority int32
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
	inodes := s == SignalNodeFsInodesFree || s == SignalImageFsInodesFree
	root, logs, vols := u.RootfsBytes, u.LogsBytes, u.VolumeBytes
	if inodes {
		root, logs, vols = u.RootfsInodes, u.LogsInodes, u.VolumeInodes
	}
	if !dedicatedImageFS {
		return int64(root + logs + vols)
	}
	if s == SignalImageFsAvailable || s == SignalImageFsInodesFree {
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
	info, ok := signals[signal]
	if !ok {
		return
	}
	keys := make([]rankKey, len(pods))
	for i, p := range pods {
		k := rankKey{index: i, priority: schedcorev1.PodPriority(p)}
		u, found := idx[p.UID]
		k.found = found
		switch {
		case info.memory:
			k.request = podRequest(p, corev1.ResourceMemory)
			if found {
				k.usage = int64(u.MemoryWorkingSetBytes)
			}
		case info.disk:
			if info.resource == corev1.ResourceEphemeralStorage {
				k.request = podRequest(p, corev1.ResourceEphemeralStorage)
			}
			if found {
				k.usage = diskUsage(u, signal, snap.DedicatedImageFS)
			}
		default:
			if found {
				k.usage = int64(u.Processes)
			}
		}
		keys[i] = k
	}
	byUsage := info.memory || info.disk
	// Keys hold no pointers, and the index breaks ties: an unstable sort
	// gives the stable order without moving pointers about.
	slices.SortFunc(keys, func(a, b rankKey) int {
		var c int
		if byUsage {
			if c = exceedsFirst(a, b); c == 0 {
				if c = cmp.Compare(a.priority, b.priority); c == 0 {
					c = aboveRequestFirst(a, b)
				}
			}
		} else if c = cmp.Compare(a.priority, b.priority); c == 0 {
			c = moreUsageFirst(a, b)
		}
		if c == 0 {
			c = cmp.Compare(a.index, b.index)
		}
		return c
	})
	orig := slices.Clone(pods)
	for i := range keys {
		pods[i] = orig[keys[i].index]
	}
}

// noStatsFirst puts a pod without usage before one with usage; 0 when both
// have it or neither has.
func noStatsFirst(a, b rankKey) int { return cmpTrueFirst(!a.found, !b.found) }

// exceedsFirst puts a pod whose usage exceeds its request first.
func exceedsFirst(a, b rankKey) int {
	if c := noStatsFirst(a, b); c != 0 || !a.found {
		return c
	}
	return cmpTrueFirst(a.usage > a.request, b.usage > b.request)
}

// aboveRequestFirst puts the pod with more usage above its request first.
func aboveRequestFirst(a, b rankKey) int {
	if c := noStatsFirst(a, b); c != 0 || !a.found {
		return c
	}
	return cmp.Compare(b.usage-b.request, a.usage-a.request)
}

// moreUsageFirst puts the pod with more usage first.
func moreUsageFirst(a, b rankKey) int {
	if c := noStatsFirst(a, b); c != 0 || !a.found {
		return c
	}
	return cmp.Compare(b.usage, a.usage)
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
