// Package status writes the statuses a node computes for its pods to the API
// server: kubelet's status manager, with fewer requests. nodekit.NewPodHalf
// builds one from PodHalfOptions.Status.
//
// # Usage
//
// The pod workers call SetPodStatus with each status they generate, and
// PodTerminated once a pod's termination finished; the pod source's
// removals call RemovePod. Run, in a goroutine of its own, writes:
//
//	w, err := status.New(status.Options{
//		Pods:       func(ns string) status.PodClient { return clientset.CoreV1().Pods(ns) },
//		Registerer: reg,
//	})
//	go w.Run(ctx)
//	w.SetPodStatus(pod, generated) // never blocks
//
// SyncOnce is Run's step; it returns how long to wait before it next has
// work.
//
// A write is a strategic-merge PATCH of pods/status holding only what
// differs from the API's copy of the pod (conditions merged by type, so
// conditions the node does not own are left alone), with metadata.uid as a
// precondition and no other metadata. The API's copy is the newest of the
// pod handed to SetPodStatus and the pod each write returns, so a write
// needs no read before it; SeeAPIPod hands in a newer copy whose status
// alone changed (podsync's engine gives it the watch's echo of each write),
// which the writer keeps instead of its own copy of the reply. Once the
// API's copy shows the node's status, the writer holds that copy's status
// instead of its own: a node keeps one status per pod, not two. A static
// pod's status goes to its mirror pod (the pod whose
// kubernetes.io/config.mirror holds the static pod's config hash), found
// by a LIST of the node's pods or handed in by SetMirrorPod.
// A phase never moves back from Succeeded or Failed; PodTerminated makes a
// status final when the caller's was not. Once an API pod being deleted has
// its terminal phase, the writer deletes it with grace period 0 and a UID
// precondition, kubelet's final delete; static and mirror pods are never
// deleted.
//
// # Timing
//
// A change is written at once; statuses set while a write is on its way are
// written together, the latest winning. Up to MaxParallelWrites (4) pods
// are written at a time, one request in flight per pod. Every
// ReconcilePeriod (10s) every pod is checked against the API's copy, which
// costs no request when it matches. A failed request is retried for that
// pod alone after RetryBackoff (500ms) doubling to MaxRetryBackoff (10s).
// The request count of a pod lifecycle is in BENCHMARKS.md.
//
// # Limits
//
// With nil Options.Pods nothing is written; statuses are recorded and
// Status serves them. The writer does not create mirror pods (podsource's
// MirrorPods does), and a pod gone from the API (404, or another UID under
// its name) is not written again.
//
// # Differences from the kubelet
//
//   - No GET before a write, and none for the reconcile. Reads are LISTs by
//     name on the node's field selector, so a missing mirror pod is an
//     empty answer rather than Forbidden.
//   - Patches carry no $setElementOrder list for conditions; a new
//     condition goes last in the API's list.
//   - Failed writes back off per pod instead of waiting for the next
//     reconcile or another pod's change.
//   - With Options.PendingDelay (default 0, kubelet's way), a change that
//     leaves a Pending pod Pending waits that long, so a pod whose
//     containers start within it costs one patch, not two.
//   - Terminal phases are held back by the caller, not by the writer, and
//     container-state transition checks are the caller's (with Status).
//   - A mirror pod whose config hash is not the static pod's gets no status
//     (kubelet writes to the mirror pod found by name), and the mirror pod
//     is not watched: a change others make to its status is seen at the
//     next write that fails, or not at all.
package status
