// Package status writes the statuses a node computes for its pods to the API
// server: kubelet's status manager, with fewer requests.
//
// # Usage
//
// The pod workers call SetPodStatus with each status they generate, and
// PodTerminated once a pod's termination finished (kubelet's
// SyncTerminatedPod); the pod source's removals call RemovePod. Run, in a
// goroutine of its own, writes:
//
//	w, err := status.New(status.Options{
//		Pods:       func(ns string) status.PodClient { return clientset.CoreV1().Pods(ns) },
//		Registerer: reg,
//	})
//	...
//	go w.Run(ctx)
//	w.SetPodStatus(pod, generated) // never blocks
//
// SyncOnce is the step Run takes, for tests and for fleets of simulated
// nodes driven by one loop; it returns how long to wait before it next has
// work.
//
// As every nodekit package, status declares the client it uses per
// resource, with only the methods it calls and client-go's signatures
// (PodClient), and takes a resource used in many namespaces through a
// function of the namespace (Options.Pods): a clientset's
// CoreV1().Pods(ns) is a PodClient as it is. The package does not import
// client-go's clientset and its scheme of every API group.
//
// # What is written, and when
//
// A status change is written at once: SetPodStatus wakes Run, and statuses
// set while a write is on its way are written together, the latest winning.
// Up to MaxParallelWrites (4) pods are written at a time, one request in
// flight per pod, so a burst of pods starting together is not written one
// request after the other.
// Every ReconcilePeriod (10s) every pod is checked again against the API's
// copy, which costs no request when the API has the pod's status.
//
// A write is a strategic-merge PATCH of pods/status holding only what
// differs from the API's copy of the pod (conditions merge by type, so only
// the conditions that changed are named, and conditions the node does not
// own are left alone) and metadata.uid as a precondition, so a pod deleted
// and recreated under the same name is never written. No other metadata is
// ever sent: some of it (deletionGracePeriodSeconds) may not change, and a
// status write carrying it is refused. The API's copy is the newest of the
// pod handed to SetPodStatus (by resource version) and the pod each write
// returns, so a write needs no read before it. A pod is read only to find a
// static pod's mirror pod, whose UID the node does not know, and after a
// write is refused because the pod under that name has another UID (the API
// server answers 422, metadata.uid is immutable). That read is a LIST of the node's
// pods (field selectors spec.nodeName and metadata.name): the Node
// authorizer lets a node GET only pods it knows to be bound to it and
// answers Forbidden, not NotFound, for one that does not exist yet.
//
// A static pod (kubernetes.io/config.source not "api") has its status
// written to its mirror pod: the pod of the same namespace and name whose
// kubernetes.io/config.mirror annotation holds the static pod's config hash.
// While there is none, the writer looks again after its back-off and at
// each reconcile, or at once when SetMirrorPod hands it the mirror pod
// (podsource.MirrorPodsOptions.Created does as it creates one). A mirror
// pod recreated with another UID is found again
// when a write to the old one is refused.
//
// The writer never moves a phase back from Succeeded or Failed, whether the
// node recorded it or the API has it; a terminal phase turns the Ready and
// ContainersReady conditions False. A condition's lastTransitionTime moves
// only when its status does, and startTime never changes once set. The
// caller decides when a phase turns terminal (only once no container can run
// any more) and checks container-level rules against Status; PodTerminated
// makes a status final itself when the caller's was not (containers not
// terminated become ContainerStatusUnknown, exit code 137; a pod that is not
// static becomes Failed).
//
// Once PodTerminated was called for an API pod whose deletion began
// (deletionTimestamp set) and the API has its terminal phase, the writer
// deletes it with grace period 0 and a UID precondition, kubelet's final
// delete, and writes nothing more for it. Static pods and mirror pods are
// never deleted.
//
// A failed request is retried for that pod alone after a back-off of
// RetryBackoff (500ms) doubling to MaxRetryBackoff (10s); other pods go on.
// A pod gone from the API (404, or another UID under its name) is not
// written again. The writer keeps state only for pods it was told about and
// not told to forget (RemovePod).
//
// # Cost per pod lifecycle
//
// Pending, Running, Ready, a graceful delete, the terminal status and the
// final delete cost 5 requests (4 PATCH, 1 DELETE) and 2.5 KiB of request
// bodies for a one-container pod against a real API server (BENCHMARKS.md,
// "podsync"). kubelet's status manager GETs the pod before every PATCH and
// before the final DELETE (10 requests for the same sequence) and adds an
// element-order list of every condition to each patch.
// The counters nodekit_podstatus_requests_total{verb} and
// nodekit_podstatus_request_failures_total{verb} (and
// nodekit_podstatus_patch_bytes_total) are registered through
// Options.Registerer.
//
// # Differences from kubelet
//
//   - No GET before a write, and none for the reconcile: the API's copy is
//     the pod the caller hands in or the last response. Reads are LISTs by
//     name on the node's field selector, so a missing mirror pod is an
//     empty answer rather than Forbidden.
//   - Patches carry no $setElementOrder list for conditions; a new
//     condition goes last in the API's list.
//   - Failed writes back off per pod instead of waiting for the next
//     reconcile or the next change of another pod.
//   - With Options.PendingDelay (default 0, kubelet's way), a change that
//     leaves a Pending pod Pending (ContainerCreating) waits that long, so
//     a pod whose containers start within it costs one patch, not two.
//   - Terminal phases are held back by the caller, not by the writer, and
//     container-state transition checks are the caller's (with Status).
//   - A mirror pod whose config hash is not the static pod's gets no status
//     (kubelet writes to the mirror pod found by name).
//   - The mirror pod of a static pod is not watched: a change others make to
//     its status is seen at the next write that fails or not at all.
//
// # Limits
//
// With nil Options.Pods nothing is written; statuses are recorded and Status
// serves them. The writer does not create mirror pods (podsource's
// MirrorPods does).
package status
