package eviction

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
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
	pod      *corev1.Pod
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

func podRequest(pod *corev1.Pod, name corev1.ResourceName) int64 {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	q, ok := reqs[name]
	if !ok {
		return 0
	}
	return q.Value()
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
		k := rankKey{pod: p, priority: schedcorev1.PodPriority(p)}
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
	byPriority := func(a, b *rankKey) int { return cmp.Compare(a.priority, b.priority) }
	// noStats puts pods without usage first; 0 when both have it or neither.
	noStats := func(a, b *rankKey) int { return cmpTrueFirst(!a.found, !b.found) }
	exceeds := func(a, b *rankKey) int {
		if c := noStats(a, b); c != 0 || !a.found {
			return c
		}
		return cmpTrueFirst(a.usage > a.request, b.usage > b.request)
	}
	aboveRequest := func(a, b *rankKey) int {
		if c := noStats(a, b); c != 0 || !a.found {
			return c
		}
		return cmp.Compare(b.usage-b.request, a.usage-a.request)
	}
	var order []func(a, b *rankKey) int
	if info.memory || info.disk {
		order = []func(a, b *rankKey) int{exceeds, byPriority, aboveRequest}
	} else {
		processes := func(a, b *rankKey) int {
			if c := noStats(a, b); c != 0 || !a.found {
				return c
			}
			return cmp.Compare(b.usage, a.usage)
		}
		order = []func(a, b *rankKey) int{byPriority, processes}
	}
	slices.SortStableFunc(keys, func(a, b rankKey) int {
		for _, f := range order {
			if c := f(&a, &b); c != 0 {
				return c
			}
		}
		return 0
	})
	for i := range keys {
		pods[i] = keys[i].pod
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
