// Package volume gives pods their data as the kubelet v1.37 does: Secret,
// ConfigMap, downward-API and projected volumes (service-account tokens,
// ConfigMaps such as kube-root-ca.crt, Secrets, downward API), memory-backed
// emptyDir volumes, environment variables from ConfigMaps, Secrets,
// container resources and Services, and image pull credentials. Its Manager
// is podsync/cri's cri.PodData; podsync/cri/backend builds one for a pod
// half from the API's clients.
//
// # Usage
//
//	m, _ := volume.New(volume.WithClients(volume.Options{ // Secrets, ConfigMaps, ... as the node
//		Allocatable: node.Allocatable, OnChange: engine.Trigger}, client))
//	go m.Run(ctx) // watches and token refreshes
//	syncer, _ := cri.New(cri.Options{Runtime: rt, PodData: m, ...})
//
// The clients (SecretClient, ConfigMapClient, ServiceClient,
// ServiceAccountClient) are taken through functions of the namespace;
// a clientset's per-resource clients are such clients as they are.
//
// SetUpPod, at the start of every SyncPod, makes the pod directory
// <PodRoot>/<uid> and each volume at volumes/<plugin>/<name> with the
// kubelet's plugin names; TearDownPod, once the pod's containers and
// sandbox are gone, stops its watches, unmounts what is below the directory
// and removes it. Secret, downward-API and projected volumes are on a tmpfs
// of their own, ConfigMap volumes on disk, memory emptyDirs on a tmpfs sized
// as the kubelet sizes it. Files are written as the kubelet's atomic writer
// writes them (a new ..<timestamp> directory, the ..data symlink switched by
// one rename), so a container never sees part of an update; paths that
// would leave the volume's directory are refused.
//
// Every read is made as the node (system:node:<name>). A pod referencing an
// object that is missing or that the node may not read waits: SetUpPod
// returns an error wrapping ErrMount and records a FailedMount event; env
// references leave the container in CreateContainerConfigError. Other pods
// are not held up, and OnChange syncs the pod again when the object
// appears. Static pods may not reference API objects
// (ErrStaticPodReference).
//
// # Timing
//
// One list-and-watch per referenced Secret or ConfigMap, field-selected by
// name and shared by every pod that uses it (started at the first use,
// stopped after the last), and one of all Services for the service
// environment variables. A change rewrites the volumes of the pods using
// the object at once. Service-account tokens are requested through
// TokenRequest and again once 80% of their lifetime has passed or they are
// 24h old (less up to 10s of jitter), on the injected clock. SetUpPod waits
// at most Options.SyncTimeout (1s) for an object's first list
// (ErrNotSynced). API cost and memory per watch are in BENCHMARKS.md.
//
// # Limits
//
// No projected clusterTrustBundle or podCertificate sources, no CSI,
// persistent or other network volumes (podsync/cri reports them as
// CreateContainerConfigError), no credential providers, no SELinux labels.
// As with the kubelet, an open that resolved ..data just before a switch
// can find the old directory gone (ENOENT) and must retry.
//
// # Differences from the kubelet
//
//   - Volumes follow Secret and ConfigMap changes within the watch's
//     latency, rewritten from Run's goroutine, instead of at the pod's next
//     sync (up to the kubelet's 1 min resync later); downward-API volumes
//     follow label and annotation changes at the pod's next sync, as in the
//     kubelet.
//   - A missing object's FailedMount carries the API server's error (for an
//     object the node may not read, Forbidden) where the kubelet reports a
//     timed-out cache sync.
//   - fsGroup is applied as the kubelet applies it to the volumes it
//     writes; fsGroupChangePolicy makes no difference, since these volumes
//     are written afresh.
package volume
