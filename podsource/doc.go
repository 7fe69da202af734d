// Package podsource says which pods this node should run. Pods come from
// sources, each sending its full set; a Merger turns the sets into one
// stream of incremental updates, as kubelet's pod config does; MirrorPods
// keeps a mirror pod in the API server for every static pod.
//
// # Sources
//
// A PodSource sends its full set (an Update with Op OpSet) whenever it
// changes, the first as soon as it is known, even when empty. Three come
// with the package, named as kubelet names them:
//
//   - File ("file"): a directory of manifests (not recursed; names starting
//     with "." ignored) or a single manifest file; one Pod per file, YAML or
//     JSON. Watched with inotify (fsnotify) on the directory, or on the
//     file's directory so a file renamed into place is seen, and re-listed
//     every 20s so nothing is missed. A manifest is parsed again only when
//     its bytes change. Entries that are not regular files (FIFOs, devices,
//     sockets, directories and links to them) are skipped, logged and
//     listed in File.Errors. Of two files declaring the same pod, the one
//     whose name sorts last is used, as in kubelet.
//   - HTTP ("http"): a manifest URL serving one Pod, a PodList or a v1 List,
//     fetched every 20s with configurable headers and a 10s timeout.
//   - API ("api"): the pods bound to the node, listed and watched by a
//     client-go reflector with the field selector spec.nodeName=<node>, the
//     only pod list a node identity may make. It starts when Run is called;
//     kubelet waits for its node informer to sync first, so call Run once
//     the Node is registered if that matters. Mirror pods come through it,
//     as in kubelet; IsMirrorPod tells them apart.
//
// Manifests from files and URLs get every API default a v1 Pod gets when
// kubelet decodes it (SetPodDefaults lists them; among them requests from
// limits, so a limits-only pod is Guaranteed, pull policies, probe and
// volume defaults), then kubelet's static pod defaults, and are validated
// (see DecodeManifest, ValidateStaticPod): the name becomes "<name>-<node>",
// the namespace "default" when empty, spec.nodeName the node; the UID,
// unless metadata.uid is given, is a hash of the defaulted pod, the node
// name and the file path or URL, so the same manifest keeps its UID and an
// edited one gets a new one; the annotations kubernetes.io/config.hash (the
// UID) and kubernetes.io/config.source are set, and file pods tolerate every
// NoExecute taint. The merger adds kubernetes.io/config.seen. A node name,
// wherever this package takes one, goes through CanonicalNodeName: trimmed
// and lower-cased, as kubelet does with its hostname. A manifest that cannot
// be used is a *ManifestError naming the file or URL and the field:
//
//	podsource: file /etc/kubernetes/manifests/web.yaml: spec.containers[1].name: Duplicate value: "app"
//
// Static pods may not reference other API objects (service accounts,
// Secrets, ConfigMaps, projected tokens, ClusterTrustBundles, pod
// certificates, claims, CSI and other API-backed volumes): kubelet refuses
// them, and NodeRestriction would refuse their mirror pods.
//
// The UID hash is FNV-128a, as in kubelet v1.37 (older kubelets used MD5),
// but over nodekit's encoding of the pod, so UIDs are not byte-for-byte
// kubelet's. Unlike kubelet, the node name is part of the hash for URL pods
// too.
//
// # Merging
//
// NewMerger takes the sources; Run runs them; Updates is the merged stream
// for the pod sync loop. Each SET is compared, by UID, with the source's
// previous one: ADD (new), UPDATE (spec, labels, non-local annotations,
// deletion grace period changed), DELETE (graceful deletion began), REMOVE
// (gone), RECONCILE (status alone changed), sent in the order REMOVE, ADD,
// UPDATE, DELETE, RECONCILE. An edited static manifest therefore yields
// REMOVE of the old pod and ADD of the new one; a manifest rewritten with
// the same content yields nothing. A source's first set always yields an
// update (an empty ADD when nothing else), and SeenAllSources or
// SeenAllSourcesC tell when every source has been heard from: until then a
// missing pod may only be late. A full pod name is held by one pod: the
// first in a set (kubelet's pod config rule; the File source settles its
// own duplicates before, keeping the file sorting last, as kubelet's file
// store does), and across sources the source that has it; others are
// dropped with a log line and, with a Recorder, a FailedValidation event,
// and admitted once the holder lets the name go. Mirror pods are exempt.
//
// Merge is Run's step, for callers that run sources themselves.
//
// # Steps
//
// Every loop here has the step shape the library uses everywhere,
// SyncOnce(ctx) error, and a Run that repeats it. File.SyncOnce re-lists
// the path and HTTP.SyncOnce fetches the URL once; what they found is read
// with File.Pods and HTTP.Pods, the same set that Run sends as an OpSet
// update. MirrorPods.SyncOnce takes its static pods from
// MirrorPodsOptions.StaticPods.
//
// # Nothing good is lost
//
// Three deliberate differences from kubelet:
//
//   - A manifest file that was valid and becomes unreadable or invalid (a
//     half-written file, a bad edit) keeps the pod from its last valid
//     version. The error is logged and, with a Recorder, recorded as an
//     InvalidManifest event on that pod, when found and at every re-list,
//     until the file is fixed or removed. kubelet drops the pod, killing a
//     working static pod (an API server, say) because of a typo. A file
//     that the File source's Run finds empty or cut short is taken as still
//     being written: it counts as invalid only if it stays so for
//     SettleDelay (1s), so an editor's plain write (truncate, then write)
//     is just an edit.
//   - A manifest URL that fails, times out, answers other than 200 or serves
//     something invalid keeps the last set it served (kubelet keeps it too
//     for fetch failures; nodekit also for undecodable and invalid bodies).
//     Until the first good answer nothing is sent, so the source is not
//     counted as seen. An empty 200 body is an empty set, as in kubelet.
//   - The API source lists again at most APIOptions.MaxRetryWait (10s)
//     after a failure, where kubelet keeps client-go's back-off (up to a
//     minute): after an API server outage a pod deleted meanwhile is
//     stopped within seconds of the server's return.
//
// # Mirror pods
//
// MirrorPods.SyncOnce(ctx) makes the API server's mirror pods match the
// static pods that MirrorPodsOptions.StaticPods returns (Merger.StaticPods
// fits): each gets a copy (same labels, annotations and
// spec) with kubernetes.io/config.mirror set to the config hash and a
// controller owner reference to the Node, without blockOwnerDeletion. A
// mirror pod whose hash no longer matches, or whose deletion began, is
// deleted and recreated; one without a static pod is deleted, but only once
// MirrorPodsOptions.SourcesReady (Merger.SeenAllSources fits) says every
// source has reported, so that a restarted agent that has not read its
// manifests yet keeps the mirror pods it made before. Deletions use
// a UID precondition and grace period 0. Run repeats SyncOnce every 10s and
// on Trigger. All of it works as system:node:<name> under the Node
// authorizer and NodeRestriction, which allow a node to create only mirror
// pods bound to itself with a controller owner reference to its own Node
// (matching UID) and no references to other API objects, and to delete only
// pods bound to itself.
//
// # Clients
//
// As every nodekit package, podsource declares the clients it uses per
// resource, with only the methods it calls and client-go's signatures:
// APIPodClient (list and watch of every namespace's pods, for the API
// source), MirrorPodClient and NodeClient. A resource used in many
// namespaces is taken through a function of the namespace
// (MirrorPodsOptions.Pods). A clientset's per-resource clients are such
// clients as they are:
//
//	podsource.APIOptions{Pods: clientset.CoreV1().Pods(metav1.NamespaceAll), ...}
//	podsource.MirrorPodsOptions{
//		Pods:  func(ns string) podsource.MirrorPodClient { return clientset.CoreV1().Pods(ns) },
//		Nodes: clientset.CoreV1().Nodes(), ...}
//
// The package does not import client-go's clientset and its scheme of every
// API group.
//
// # Timing
//
// File re-list and URL fetch: every 20s (Period, 1s to 24h). Settle delay
// for a manifest found newly invalid: 1s. URL timeout:
// 10s (10ms to 5m). Mirror pod sync: every 10s (1s to 24h). All timers come
// from the injected clock; the URL timeout too, so a FakeClock drives it.
// Merged updates are buffered (50, as kubelet); a full buffer blocks the
// merger, and so the sources.
//
// # Limits
//
// One pod per manifest file; manifests up to 10 MiB, and up to 10 MiB once
// their YAML aliases are expanded (MaxExpandedManifestBytes, beyond
// kubelet): the expanded size is counted on the parsed document before
// anything is expanded, so a small manifest that references a large anchor
// many times is refused, naming the file or URL, without the heap it would
// take to expand it. The File source does not follow a directory of symlinks
// swapped atomically (a ConfigMap volume) by inotify; the re-list catches
// it. Validation covers what a node needs and what the API server would
// refuse most often, not all of the API server's pod validation.
//
// # Cost
//
// Reading, decoding and merging a directory of 1,000 small manifests takes
// well under a second of CPU and about 15 MB of heap; one changed file costs
// one decode. Measured figures, with their command, machine and date, are
// in BENCHMARKS.md at the repository root.
package podsource
