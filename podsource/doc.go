// Package podsource says which pods this node should run. Pods come from
// sources, each sending its full set; a Merger turns the sets into one
// stream of incremental updates, as kubelet's pod config does; MirrorPods
// keeps a mirror pod in the API server for every static pod.
// nodekit.NewPodHalf builds all three from its options.
//
// # Usage
//
//	file, _ := podsource.NewFile(podsource.FileOptions{Path: "/etc/kubernetes/manifests", NodeName: node})
//	api, _ := podsource.NewAPI(podsource.APIOptions{NodeName: node,
//		Pods: clientset.CoreV1().Pods(metav1.NamespaceAll)})
//	merger, _ := podsource.NewMerger(podsource.MergerOptions{}, file, api)
//	go merger.Run(ctx)
//	for u := range merger.Updates() { ... } // ADD, UPDATE, DELETE, REMOVE, RECONCILE
//
// Three sources come with the package, named as kubelet names them: File
// ("file", a manifest directory or file, one Pod per file, YAML or JSON),
// HTTP ("http", a manifest URL serving a Pod, a PodList or a v1 List) and
// API ("api", the pods bound to the node, listed and watched with the field
// selector spec.nodeName=<node>). A PodSource sends its full set whenever it
// changes, the first as soon as it is known, even when empty, so
// SeenAllSources and SeenAllSourcesC tell when every source has been heard
// from.
//
// Manifests from files and URLs get the API's v1 defaults and kubelet's
// static pod defaults, and are validated (DecodeManifest,
// ValidateStaticPod): name "<name>-<node>", a UID hashed from the pod, the
// node and its origin, the kubernetes.io/config.* annotations. A manifest
// that cannot be used is a *ManifestError naming the file or URL and the
// field. Static pods may not reference other API objects.
//
// The Merger compares each set, by UID, with the source's previous one and
// sends REMOVE, ADD, UPDATE, DELETE, RECONCILE in that order; a full pod
// name is held by one pod at a time. Every pod it sends carries the
// kubernetes.io/config.source annotation (its source's name) and
// config.seen (when the pod was first seen); it adds them to a copy of the
// source's pod, sharing all but the annotations, unless that pod already
// carries them with the values the merger holds (a source may stamp its
// pods, as nodekit.SharedPods does): then the pod is sent as it is, and a
// node keeps one Pod per pod, not two. MirrorPods.SyncOnce makes the API
// server's mirror pods match the static pods, with a controller owner
// reference to the Node, as the Node authorizer and NodeRestriction allow;
// it deletes a mirror pod without a static pod only once
// MirrorPodsOptions.SourcesReady says every source has reported.
//
// # Timing
//
// File sources are watched with inotify and re-listed every 20s (Period,
// 1s to 24h); a manifest is parsed again only when its bytes change. URLs
// are fetched every 20s with a 10s timeout (10ms to 5m). Mirror pods are
// synced every 10s and on Trigger; TriggerWait also waits (with a timeout
// on the clock) for that sync to end, so that an agent can create a static
// pod's mirror pod before it starts the pod, as the kubelet does. All
// timers, the URL timeout too, come from the injected clock. Merged
// updates are buffered (50, as kubelet); a full buffer blocks the merger,
// and so the sources. Each loop has the step SyncOnce(ctx) error; Merge is
// the merger's step.
//
// # Limits
//
// One pod per manifest file; manifests up to 10 MiB, and up to 10 MiB once
// their YAML aliases are expanded (MaxExpandedManifestBytes), counted
// before anything is expanded. A directory of symlinks swapped atomically
// (a ConfigMap volume) is seen at the re-list, not through inotify.
// Validation covers what a node needs and what the API server refuses most
// often, not all of its pod validation. Costs are in BENCHMARKS.md.
//
// # Differences from the kubelet
//
//   - A manifest file that was valid and becomes unreadable or invalid keeps
//     the pod from its last valid version, with an InvalidManifest event at
//     every re-list until fixed (kubelet drops the pod). A file found empty
//     or cut short counts as invalid only if it stays so for SettleDelay
//     (1s), so an editor's truncate-then-write is just an edit.
//   - A manifest URL that serves something undecodable or invalid keeps the
//     last set it served (kubelet keeps it only for fetch failures).
//   - The API source lists again at most APIOptions.MaxRetryWait (10s)
//     after a failure, where kubelet keeps client-go's back-off (up to a
//     minute). It starts when Run is called; kubelet waits for its node
//     informer to sync first.
//   - The static pod UID is FNV-128a as in kubelet v1.37, but over
//     nodekit's encoding of the pod, so UIDs are not byte-for-byte kubelet's;
//     the node name is part of the hash for URL pods too.
package podsource
