// Package volume gives pods their data as the kubelet v1.37 does: Secret,
// ConfigMap, downward-API and projected volumes (service-account tokens,
// ConfigMaps such as kube-root-ca.crt, Secrets, downward API), memory-backed
// emptyDir volumes, environment variables from ConfigMaps, Secrets,
// container resources and Services, and image pull credentials. Its Manager
// is the CRI syncer's cri.PodData:
//
//	core := nodeClientset.CoreV1()
//	m, _ := volume.New(volume.Options{
//		Secrets:         func(ns string) volume.SecretClient { return core.Secrets(ns) },
//		ConfigMaps:      func(ns string) volume.ConfigMapClient { return core.ConfigMaps(ns) },
//		Services:        func(ns string) volume.ServiceClient { return core.Services(ns) },
//		ServiceAccounts: func(ns string) volume.ServiceAccountClient { return core.ServiceAccounts(ns) },
//		Recorder: rec, Allocatable: node.Allocatable, OnChange: engine.Trigger})
//	go m.Run(ctx)
//	cri, _ := cri.New(cri.Options{Runtime: rt, PodData: m, ...})
//
// As every nodekit package, volume declares the clients it uses per
// resource, with only the methods it calls and client-go's signatures
// (SecretClient, ConfigMapClient, ServiceClient, ServiceAccountClient), and
// takes each through a function of the namespace, since it reads them in
// the namespaces of its pods. A clientset's per-resource clients are such
// clients as they are; the package does not import client-go's clientset
// and its scheme of every API group.
//
// # The pod directory
//
// The CRI syncer passes each pod's directory, <PodRoot>/<uid>, the
// kubelet's <root-dir>/pods/<uid>. SetUpPod, called at the start of every
// SyncPod and so before the sandbox exists, makes it with volumes/ and
// plugins/ and each volume at volumes/<plugin>/<name> with the kubelet's
// plugin names (kubernetes.io~secret, kubernetes.io~configmap,
// kubernetes.io~downward-api, kubernetes.io~projected,
// kubernetes.io~empty-dir). podsync writes etc-hosts and containers/ there.
// TearDownPod, called from SyncTerminatedPod once the pod's containers and
// sandbox are gone, stops the pod's watches, forgets its tokens, unmounts
// every mount below the directory and removes it; it is the one place a pod
// directory is removed when a Manager is in use.
//
// # Volumes
//
// As the kubelet keeps them: Secret, downward-API and projected volumes on a
// tmpfs of their own (their content never reaches the disk), ConfigMap
// volumes on disk, emptyDir volumes with medium Memory on a tmpfs sized as
// the kubelet sizes it: the smallest of the node's allocatable memory
// (Options.Allocatable), the pod's memory limit (when every container has
// one) and the volume's sizeLimit (the kernel's default, half the memory,
// when none is known).
// Every key becomes a file named after it, or only the items, each at its
// path with its mode; defaultMode (0644 when unset) applies otherwise. A
// missing optional Secret or ConfigMap is an empty volume, a missing
// optional key is left out. podsync mounts these volumes read-only whatever
// the volumeMount says, as the kubelet does, and bind-mounts subPaths of
// them below the pod directory's volume-subpaths/ (see podsync), which
// TearDownPod unmounts with the rest.
//
// Files are written as the kubelet's atomic writer writes them, so that a
// container never sees part of an update: the payload goes to a new hidden
// directory ..<timestamp>.<random>, the symlink ..data is switched to it by
// one rename, and each top-level name is a symlink <name> -> ..data/<name>
// made once. The previous directory and names no longer in the payload are
// removed afterwards; a payload equal to what is there writes nothing. A
// reader that opens files through a name sees a whole file of one version;
// one that resolves ..data once and reads through it sees one version of
// the whole set. As with the kubelet, an open that resolved ..data just
// before a switch can find the old directory gone (ENOENT) and must retry.
// Paths that are absolute, contain a ".." element or start with "..", and
// two sources of a projected volume writing one path, are refused; nothing
// is written outside the volume's directory.
//
// # Keeping data up to date: one watch per object
//
// Like the kubelet's default "Watch" strategy, the Manager keeps one
// list-and-watch per referenced Secret or ConfigMap, field-selected by name
// (the request the Node authorizer allows a node for objects its pods use),
// shared by every pod that references it (a reference count; no per-pod
// watch), started at the first SetUpPod that references it and stopped
// when the last such pod is torn down. Secrets and ConfigMaps used by env,
// envFrom and imagePullSecrets are watched too. Services are one list and
// watch of all Services, for the service environment variables. A change
// rewrites the volumes of the pods that use the object, from Run's
// goroutine, at once (the end-to-end test measures 0.1–0.2 s from the
// update to the container seeing the file; the kubelet rewrites at the pod's
// next sync, up to its 1 min resync later), then calls Options.OnChange for
// those pods so a pod that waits for an object starts as soon as it
// appears. API cost: one LIST and one WATCH per object at its first use,
// then one WATCH each time client-go's watch times out (every 5–10 min,
// about 8 an hour per object) and the changed objects streamed; the figures
// for one pod are in BENCHMARKS.md (about 34 requests and 20 KB an hour).
// A watch costs about 11 KiB of memory, 4 KiB of heap and 7 KiB of the
// reflector's goroutine stack (BenchmarkWatchedObject).
//
// # Service-account tokens
//
// A projected serviceAccountToken is requested through the TokenRequest API
// (serviceaccounts/<name>/token, allowed to the node for pods bound to it)
// with the projection's audience and expirationSeconds (3600 when unset),
// bound to the pod (kind Pod, name and UID), for the pod's service account
// ("default" when unset). Tokens are cached per service account, audience,
// lifetime and pod, and requested again once 80% of their lifetime has
// passed or they are 24h old, less a jitter of up to 10s, on the injected
// clock: Run wakes for the first refresh due and rewrites the volume. A
// refresh the API refuses while the cached token is valid keeps that token;
// a first request that fails is the pod's FailedMount.
//
// # Environment variables
//
// EnvFrom returns the container's envFrom variables (sources in order, a
// later one overriding an earlier one, the prefix applied; keys are taken
// as they are, as the kubelet v1.37 takes them now that the API server
// accepts any printable name) and, unless the pod's enableServiceLinks is
// false, the variables of the Services of its namespace that have a cluster
// IP; default/kubernetes is always included. EnvValue answers
// configMapKeyRef, secretKeyRef and resourceFieldRef (limits and requests
// of cpu, memory, ephemeral-storage and hugepages, divided by the divisor
// and rounded up; a limit the container leaves unset is the node's
// allocatable, Options.Allocatable). podsync combines them with the
// container's own env in the kubelet's order of precedence; an error is
// CreateContainerConfigError.
//
// # Image pull credentials
//
// PullAuth reads the pod's imagePullSecrets (kubernetes.io/dockerconfigjson
// and kubernetes.io/dockercfg; the ServiceAccount admission plugin has
// copied the service account's into the pod) and returns the credentials
// whose registry key covers the image, the most specific first (the CRI
// syncer tries each in turn until one pulls): host (labels may be
// globs such as *.example.com), port and path prefix; docker.io is
// index.docker.io and a bare name is Docker Hub's library/<name>.
//
// # As the node
//
// Every read goes through clients of the node's identity
// (system:node:<name>): the Node authorizer lets it read only objects that
// pods bound to the node use. A pod that references an object the node may
// not read, or one that does not exist, waits: SetUpPod returns an error
// wrapping ErrMount ("unmounted volumes=[…]") and records a FailedMount
// event: "MountVolume.SetUp failed for volume "x" : secret "x" not found"
// as from the kubelet, or, for an object the node may not read, the API
// server's error ("secrets "x" is forbidden: User "system:node:…" cannot
// list resource …"), where the kubelet reports a timed-out cache sync.
// Env references make the container wait
// in CreateContainerConfigError; other pods are not held up, and the pod is
// synced again when the object changes (OnChange). A volume that was set up
// once keeps its last content when a refresh fails (a ConfigMap deleted
// while mounted): a FailedMount event, no error. Static pods may not
// reference Secrets, ConfigMaps or tokens: SetUpPod refuses them with
// ErrStaticPodReference and reads nothing (podsource refuses such manifests
// already).
//
// # Timing
//
// SetUpPod waits at most Options.SyncTimeout (1s) for the first list of an
// object it starts watching, then reports it as not yet read
// (ErrNotSynced); watches start when Run starts. EnvFrom waits as long for
// the first list of Services (the kubelet's "services have not yet been
// read at least once" otherwise). Without API clients, pods that
// reference API objects fail to set up and others work.
//
// # Differences from the kubelet
//
//   - fsGroup is applied as the kubelet applies it to volumes it writes:
//     Secret, ConfigMap, downward-API and projected files get the group and
//     group read, their directories and memory emptyDirs the group and the
//     set-group-ID bit (podsync does the same for emptyDirs on disk).
//     fsGroupChangePolicy makes no difference here: these volumes are
//     written afresh. A projected service-account token is owned by the
//     user every container runs as, when they all run as one (the
//     kubelet's FsUserFrom), and is 0600 when it has such an owner or the
//     pod an fsGroup (0640 with the group then). No SELinux labels.
//   - Projected clusterTrustBundle and podCertificate sources, and CSI,
//     persistent and other network volumes, are not served (podsync reports
//     them as CreateContainerConfigError).
//   - Credential providers are not used.
//   - Volumes follow object changes within the watch's latency instead of
//     at the pod's next sync; downward-API volumes follow label and
//     annotation changes at the pod's next sync, as in the kubelet.
package volume
