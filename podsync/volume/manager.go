package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/listwatch"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/internal/randutil"
	"github.com/nodekit/nodekit/podsource"

	"github.com/nodekit/nodekit/internal/loop"
)

// The clients below are the parts of the core/v1 API the Manager reads and
// writes, each of one resource in one namespace, with client-go's
// signatures (clientset.CoreV1().Secrets(ns) is a SecretClient as it is).
// All of it is allowed to a node identity (system:node:<name>) by the Node
// authorizer for pods bound to the node: list and watch of single Secrets
// and ConfigMaps (field-selected by name), list and watch of Services, and
// create of serviceaccounts/token.

// SecretClient lists and watches the Secrets of one namespace.
type SecretClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ConfigMapClient lists and watches the ConfigMaps of one namespace.
type ConfigMapClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ServiceClient lists and watches Services (of every namespace, the only
// namespace the Manager asks for).
type ServiceClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ServiceAccountClient requests tokens of the ServiceAccounts of one
// namespace.
type ServiceAccountClient interface {
	CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// Defaults and bounds of Options.
const (
	// DefaultSyncTimeout is how long SetUpPod waits for the first list of
	// an object it starts watching: 1s.
	DefaultSyncTimeout = time.Second
	// MaxSyncTimeout bounds Options.SyncTimeout.
	MaxSyncTimeout = time.Minute
)

// Options configure a Manager. Zero values take the default named in each
// field's comment.
type Options struct {
	// Secrets, ConfigMaps, Services and ServiceAccounts return the client of
	// a namespace's resource ("" for all namespaces, which only Services
	// are asked for), for example
	// func(ns string) volume.SecretClient { return clientset.CoreV1().Secrets(ns) }.
	// They come together: all four set, or none (standalone: pods that
	// reference API objects fail to set up).
	Secrets         func(namespace string) SecretClient
	ConfigMaps      func(namespace string) ConfigMapClient
	Services        func(namespace string) ServiceClient
	ServiceAccounts func(namespace string) ServiceAccountClient
	// Clock times token refreshes and the wait for a first list, and
	// stamps the atomic writer's directories. Default: the real clock.
	Clock clock.WithTicker
	// Recorder receives FailedMount events. Default nil: none.
	Recorder record.EventRecorder
	// Allocatable returns the node's allocatable resources, which the
	// downward API shows for a limit a container leaves unset. Default nil:
	// such limits are 0.
	Allocatable func() corev1.ResourceList
	// SyncTimeout is how long SetUpPod waits for the first list of an
	// object it starts watching before it reports the object as not yet
	// read. Between 0 and 1m. Default: 1s.
	SyncTimeout time.Duration
	// OnChange is called, from Run's goroutine, with the UID of each pod
	// that uses an object that changed (created, updated, deleted, or
	// refused to the node), after the pod's volumes were refreshed; an
	// agent passes its engine's Trigger so a waiting pod starts as soon as
	// its object appears (a running pod's sync then changes nothing: its
	// files were rewritten already). Default nil.
	OnChange func(types.UID)
	// Rand returns numbers in [0,1) for the token refresh jitter; it must be
	// safe for concurrent use. Default: math/rand/v2.Float64.
	Rand func() float64
}

// ErrMount is wrapped by SetUpPod's error when a volume could not be set
// up: the pod waits (the kubelet's FailedMount).
var ErrMount = errors.New("unmounted volumes")

// ErrStaticPodReference is wrapped by SetUpPod's error for a static pod
// that references API objects, which static pods may not do.
var ErrStaticPodReference = errors.New("static pods may not reference API objects")

// Manager sets up pods' volumes and resolves their data from the API, as
// the kubelet's volume manager, secret, configMap and token managers do.
// It implements cri.PodData.
type Manager struct {
	hasAPI      bool // the API clients are set
	clock       clock.WithTicker
	recorder    record.EventRecorder
	allocatable func() corev1.ResourceList
	syncTimeout time.Duration
	onChange    func(types.UID)

	objects  *objectCache
	tokens   *tokens
	services *serviceCache
	wake     chan struct{}

	mu   sync.Mutex
	pods map[types.UID]*podEntry
}

type podEntry struct {
	mu      sync.Mutex // held while the pod's volumes are written
	pod     *corev1.Pod
	dir     string
	mounted map[string]bool // volumes set up at least once

	dirty bool // an object it uses changed; guarded by Manager.mu
}

// New returns a Manager. Its watches and token refreshes run while Run
// runs.
func New(o Options) (*Manager, error) {
	set := map[string]bool{"Secrets": o.Secrets != nil, "ConfigMaps": o.ConfigMaps != nil,
		"Services": o.Services != nil, "ServiceAccounts": o.ServiceAccounts != nil}
	hasAPI := set["Secrets"] || set["ConfigMaps"] || set["Services"] || set["ServiceAccounts"]
	for _, f := range []string{"Secrets", "ConfigMaps", "Services", "ServiceAccounts"} {
		if hasAPI && !set[f] {
			return nil, fmt.Errorf("volume: Options.%s is required when another API client is set", f)
		}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = DefaultSyncTimeout
	}
	if err := optcheck.Range("volume: Options.SyncTimeout", o.SyncTimeout, 0, MaxSyncTimeout); err != nil {
		return nil, err
	}
	if o.Allocatable == nil {
		o.Allocatable = func() corev1.ResourceList { return nil }
	}
	o.Rand = randutil.Or(o.Rand)
	m := &Manager{hasAPI: hasAPI, clock: o.Clock, recorder: o.Recorder, allocatable: o.Allocatable, syncTimeout: o.SyncTimeout,
		onChange: o.OnChange, wake: make(chan struct{}, 1), pods: map[types.UID]*podEntry{}}
	m.objects = &objectCache{objects: map[objectKey]*watched{}, changed: m.objectChanged}
	if hasAPI {
		m.objects.secrets = func(ns string) (listFn, watchFn) {
			c := o.Secrets(ns)
			return func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
				return c.List(ctx, lo)
			}, c.Watch
		}
		m.objects.configMaps = func(ns string) (listFn, watchFn) {
			c := o.ConfigMaps(ns)
			return func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
				return c.List(ctx, lo)
			}, c.Watch
		}
		m.services = newServiceCache(o.Services(metav1.NamespaceAll))
	}
	m.tokens = newTokens(o.ServiceAccounts, o.Clock, o.Rand)
	return m, nil
}

// Run runs the object watches, refreshes volumes whose objects changed and
// tokens that are due, and returns nil when ctx ends, after stopping every
// watch.
func (m *Manager) Run(ctx context.Context) error {
	m.objects.start(ctx)
	var wg sync.WaitGroup
	if m.services != nil {
		wg.Add(1)
		go func() { defer wg.Done(); m.services.run(ctx) }()
	}
	defer func() {
		m.objects.stop()
		wg.Wait()
	}()
	logger := klog.FromContext(ctx)
	return loop.Run(ctx, m.clock, func(ctx context.Context) (time.Duration, error) {
		d, err := m.SyncOnce(ctx)
		if err != nil && ctx.Err() == nil {
			logger.V(2).Info("Refreshing pod volumes failed", "err", err)
		}
		return d, nil
	}, loop.Signal(m.wake))
}

// SyncOnce rewrites the volumes of pods whose objects changed and of pods
// whose tokens are due for a refresh, calls OnChange for the former, and
// returns how long until the next token refresh (negative: none is
// scheduled).
func (m *Manager) SyncOnce(ctx context.Context) (time.Duration, error) {
	next, err := m.syncOnce(ctx)
	if next.IsZero() {
		return loop.Never, err
	}
	return max(next.Sub(m.clock.Now()), 0), err
}

// syncOnce is SyncOnce; it returns when the next token refresh is due
// (zero: none is scheduled).
func (m *Manager) syncOnce(ctx context.Context) (time.Time, error) {
	now := m.clock.Now()
	m.mu.Lock()
	var due []*podEntry
	var changed []types.UID
	for uid, e := range m.pods {
		at := m.tokens.next(uid)
		if e.dirty || (!at.IsZero() && !now.Before(at)) {
			due = append(due, e)
		}
		if e.dirty {
			changed = append(changed, uid)
			e.dirty = false
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, e := range due {
		e.mu.Lock()
		if e.pod != nil {
			_, err := m.setUpVolumes(ctx, e, true)
			errs = append(errs, err)
		}
		e.mu.Unlock()
	}
	if m.onChange != nil {
		slices.Sort(changed)
		for _, uid := range changed {
			m.onChange(uid)
		}
	}
	var next time.Time
	m.mu.Lock()
	for uid := range m.pods {
		if at := m.tokens.next(uid); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	m.mu.Unlock()
	return next, errors.Join(errs...)
}

// objectChanged marks the object's pods for a refresh and wakes Run.
func (m *Manager) objectChanged(_ objectKey, pods []types.UID) {
	m.mu.Lock()
	for _, uid := range pods {
		if e := m.pods[uid]; e != nil {
			e.dirty = true
		}
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Watches returns how many objects are watched (one watch per object,
// whatever the number of pods that use it).
func (m *Manager) Watches() int { return m.objects.watches() }

func isStatic(pod *corev1.Pod) bool {
	src, ok := pod.Annotations[podsource.ConfigSourceAnnotation]
	return ok && src != podsource.APISource
}

// references lists the Secrets and ConfigMaps the pod reads: volumes,
// projections, env, envFrom and image pull secrets.
func references(pod *corev1.Pod) []objectKey {
	seen := map[objectKey]bool{}
	var out []objectKey
	add := func(k kind, name string) {
		key := objectKey{kind: k, namespace: pod.Namespace, name: name}
		if name != "" && !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add(kindSecret, v.Secret.SecretName)
		case v.ConfigMap != nil:
			add(kindConfigMap, v.ConfigMap.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add(kindSecret, s.Secret.Name)
				}
				if s.ConfigMap != nil {
					add(kindConfigMap, s.ConfigMap.Name)
				}
			}
		}
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, e := range c.Env {
				if vf := e.ValueFrom; vf != nil && vf.SecretKeyRef != nil {
					add(kindSecret, vf.SecretKeyRef.Name)
				} else if vf != nil && vf.ConfigMapKeyRef != nil {
					add(kindConfigMap, vf.ConfigMapKeyRef.Name)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					add(kindSecret, ef.SecretRef.Name)
				}
				if ef.ConfigMapRef != nil {
					add(kindConfigMap, ef.ConfigMapRef.Name)
				}
			}
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(kindSecret, s.Name)
	}
	return out
}

// usesToken reports whether the pod has a projected service-account token.
func usesToken(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					return true
				}
			}
		}
	}
	return false
}

// SetUpPod makes the pod's directory (dir: <root>/pods/<uid> in the
// kubelet's layout) with its volumes/ and plugins/ subdirectories, starts
// watching the objects the pod references, and sets up or refreshes every
// volume it serves. A volume that was never set up and cannot be is an
// error wrapping ErrMount (the pod waits; a FailedMount event names the
// volume and the cause); a volume set up before keeps its last content
// when a refresh fails (the event is recorded, the error is not returned),
// as the kubelet keeps a ConfigMap volume whose ConfigMap was deleted.
func (m *Manager) SetUpPod(ctx context.Context, pod *corev1.Pod, dir string) error {
	refs := references(pod)
	if isStatic(pod) && (len(refs) > 0 || usesToken(pod)) {
		err := fmt.Errorf("%w: pod %s/%s references Secrets, ConfigMaps or service account tokens", ErrStaticPodReference, pod.Namespace, pod.Name)
		m.event(pod, "FailedMount", err.Error())
		return err
	}
	m.mu.Lock()
	e := m.pods[pod.UID]
	if e == nil {
		e = &podEntry{mounted: map[string]bool{}}
		m.pods[pod.UID] = e
	}
	m.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pod, e.dir = pod, dir
	if len(refs) > 0 && !m.hasAPI {
		return fmt.Errorf("%w: pod %s/%s references API objects and there is no API client", ErrMount, pod.Namespace, pod.Name)
	}
	var ws []*watched
	keep := map[objectKey]bool{}
	for _, k := range refs {
		w, err := m.objects.acquire(k, pod.UID)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrMount, err)
		}
		ws = append(ws, w)
		keep[k] = true
	}
	m.objects.release(pod.UID, keep)
	m.waitSettled(ctx, ws)
	for _, d := range []string{dir, filepath.Join(dir, "volumes"), filepath.Join(dir, "plugins")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	unmounted, err := m.setUpVolumes(ctx, e, false)
	if len(unmounted) > 0 {
		return fmt.Errorf("%w=[%s]: %w", ErrMount, strings.Join(unmounted, " "), err)
	}
	return nil
}

// waitSettled waits until each watch listed once or failed to, at most
// SyncTimeout in all.
func (m *Manager) waitSettled(ctx context.Context, ws []*watched) {
	var t clock.Timer
	for _, w := range ws {
		select {
		case <-w.settled:
			continue
		default:
		}
		if t == nil {
			t = m.clock.NewTimer(m.syncTimeout)
			defer t.Stop()
		}
		select {
		case <-w.settled:
		case <-t.C():
			return
		case <-ctx.Done():
			return
		}
	}
}

// Plugin directory names of the kubelet's layout,
// <pod dir>/volumes/<plugin>/<volume>.
const (
	PluginEmptyDir    = "kubernetes.io~empty-dir"
	PluginSecret      = "kubernetes.io~secret"
	PluginConfigMap   = "kubernetes.io~configmap"
	PluginDownwardAPI = "kubernetes.io~downward-api"
	PluginProjected   = "kubernetes.io~projected"
)

// plugin returns the plugin directory of a volume the Manager serves and
// whether it sits on a tmpfs ("" for volumes it does not serve). As the
// kubelet: Secret, downward-API and projected volumes are kept in memory,
// ConfigMap volumes on disk, emptyDir on tmpfs only for medium Memory.
func plugin(v *corev1.Volume) (string, bool) {
	switch {
	case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
		return PluginEmptyDir, true
	case v.Secret != nil:
		return PluginSecret, true
	case v.ConfigMap != nil:
		return PluginConfigMap, false
	case v.DownwardAPI != nil:
		return PluginDownwardAPI, true
	case v.Projected != nil:
		return PluginProjected, true
	}
	return "", false
}

// VolumePath is the host directory of a volume the Manager serves
// (emptyDir with medium Memory, secret, configMap, downwardAPI, projected)
// below the pod directory dir; ok false for other volumes.
func (m *Manager) VolumePath(pod *corev1.Pod, dir string, v *corev1.Volume) (string, bool) {
	p, _ := plugin(v)
	if p == "" {
		return "", false
	}
	return filepath.Join(dir, "volumes", p, v.Name), true
}

// setUpVolumes writes every volume of e's pod (refreshOnly: those set up
// before) and returns the volumes never set up that failed.
func (m *Manager) setUpVolumes(ctx context.Context, e *podEntry, refreshOnly bool) ([]string, error) {
	pod := e.pod
	var unmounted []string
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		p, tmpfs := plugin(v)
		if p == "" || (refreshOnly && !e.mounted[v.Name]) {
			continue
		}
		err := m.setUpVolume(ctx, pod, filepath.Join(e.dir, "volumes", p, v.Name), v, tmpfs)
		if err == nil {
			e.mounted[v.Name] = true
			continue
		}
		m.event(pod, "FailedMount", fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.Name, err))
		if !e.mounted[v.Name] {
			unmounted = append(unmounted, v.Name)
			errs = append(errs, fmt.Errorf("volume %q: %w", v.Name, err))
		}
	}
	return unmounted, errors.Join(errs...)
}

func (m *Manager) setUpVolume(ctx context.Context, pod *corev1.Pod, path string, v *corev1.Volume, tmpfs bool) error {
	var payload map[string]File
	var err error
	gid := int64(-1)
	if hasFSGroup(pod) {
		gid = *pod.Spec.SecurityContext.FSGroup
	}
	switch {
	case v.EmptyDir != nil:
		return mountTmpfs(path, m.memoryVolumeSize(pod, v.EmptyDir), gid)
	case v.Secret != nil:
		s := v.Secret
		payload, err = m.secretPayload(pod, s.SecretName, s.Items, s.DefaultMode, s.Optional != nil && *s.Optional)
	case v.ConfigMap != nil:
		c := v.ConfigMap
		payload, err = m.configMapPayload(pod, c.Name, c.Items, c.DefaultMode, c.Optional != nil && *c.Optional)
	case v.DownwardAPI != nil:
		payload, err = m.downwardPayload(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		payload, err = m.projectedPayload(ctx, pod, v.Projected)
	}
	if err != nil {
		return err
	}
	for p := range payload {
		if err := checkPath(p); err != nil {
			return err
		}
	}
	if tmpfs {
		if err := mountTmpfs(path, 0, -1); err != nil {
			return err
		}
	}
	if gid >= 0 {
		// The kubelet's ownership of a read-only volume: group fsGroup,
		// group read on every file.
		for p, f := range payload {
			f.Mode |= 0o440
			payload[p] = f
		}
	}
	_, err = writeAtomicGroup(m.clock, path, payload, gid)
	return err
}

// memoryVolumeSize is the size of a memory-backed emptyDir as the kubelet
// sizes it: the node's allocatable memory, or the pod's memory limit when
// every container has one and it is smaller, or the volume's sizeLimit when
// smaller still; 0 (the kernel's default) when none is known.
func (m *Manager) memoryVolumeSize(pod *corev1.Pod, ed *corev1.EmptyDirVolumeSource) int64 {
	size := int64(0)
	if q, ok := m.allocatable()[corev1.ResourceMemory]; ok && q.Value() > 0 {
		size = q.Value()
	}
	smaller := func(v int64) {
		if v > 0 && (size == 0 || v <= size) {
			size = v
		}
	}
	smaller(podMemoryLimit(pod))
	if ed.SizeLimit != nil {
		smaller(ed.SizeLimit.Value())
	}
	return size
}

// podMemoryLimit is the pod's memory limit as its cgroup gets it: the sum of
// the regular containers' limits or the largest init container's, whichever
// is more; 0 when a container has none.
func podMemoryLimit(pod *corev1.Pod) int64 {
	var sum, initMax int64
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return 0
		}
		sum += q.Value()
	}
	for _, c := range pod.Spec.InitContainers {
		q, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return 0
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += q.Value() // a sidecar runs beside the containers
		} else {
			initMax = max(initMax, q.Value())
		}
	}
	return max(sum, initMax)
}

func (m *Manager) event(pod *corev1.Pod, reason, msg string) {
	if m.recorder != nil {
		m.recorder.Event(pod, corev1.EventTypeWarning, reason, msg)
	}
}

// TearDownPod stops the pod's watches and forgets its tokens, unmounts
// every mount below dir (tmpfs volumes) and removes dir. The pod's
// containers must be gone.
func (m *Manager) TearDownPod(ctx context.Context, pod *corev1.Pod, dir string) error {
	m.mu.Lock()
	e := m.pods[pod.UID]
	delete(m.pods, pod.UID)
	m.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.pod = nil
	}
	m.objects.release(pod.UID, nil)
	m.tokens.forget(pod.UID)
	if err := unmountAll(dir); err != nil {
		return err
	}
	if mounted, err := isMountPoint(dir); err == nil && mounted {
		return fmt.Errorf("volume: pod directory %s is a mount point; not removed", dir)
	}
	return os.RemoveAll(dir)
}

// secret returns the Secret as the pod's watch last saw it.
func (m *Manager) secret(pod *corev1.Pod, name string) (*corev1.Secret, error) {
	obj, err := m.read(pod, objectKey{kind: kindSecret, namespace: pod.Namespace, name: name})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Secret), nil
}

func (m *Manager) configMap(pod *corev1.Pod, name string) (*corev1.ConfigMap, error) {
	obj, err := m.read(pod, objectKey{kind: kindConfigMap, namespace: pod.Namespace, name: name})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMap), nil
}

func (m *Manager) read(pod *corev1.Pod, key objectKey) (runtime.Object, error) {
	if isStatic(pod) {
		return nil, fmt.Errorf("%w: %s", ErrStaticPodReference, key)
	}
	if !m.hasAPI {
		return nil, fmt.Errorf("no API client to read %s", key)
	}
	w, err := m.objects.acquire(key, pod.UID)
	if err != nil {
		return nil, err
	}
	m.waitSettled(context.Background(), []*watched{w})
	return w.get()
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// PullAuth returns the credentials of the pod's image pull secrets that
// cover image, the most specific registry key first, or nil. Pull secrets
// that are missing or unreadable are skipped, as the kubelet skips them.
func (m *Manager) PullAuth(pod *corev1.Pod, image string) []*runtimeapi.AuthConfig {
	var creds []Credential
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		s, err := m.secret(pod, ref.Name)
		if err != nil {
			continue
		}
		c, err := ParsePullSecret(s)
		if err != nil {
			continue
		}
		creds = append(creds, c...)
	}
	return AuthFor(creds, image)
}

// serviceCache is a list-and-watch of every Service, for the service
// environment variables.
type serviceCache struct {
	store     cache.Store
	reflector *cache.Reflector
	synced    chan struct{} // closed after the first list is stored
	once      sync.Once
}

func newServiceCache(c ServiceClient) *serviceCache {
	lw := listwatch.Selected(c.List, c.Watch, "")
	s := &serviceCache{store: cache.NewStore(cache.MetaNamespaceKeyFunc), synced: make(chan struct{})}
	s.reflector = cache.NewReflectorWithOptions(lw, &corev1.Service{}, &syncedStore{Store: s.store, s: s}, cache.ReflectorOptions{Name: "services"})
	return s
}

// syncedStore marks the cache synced after the first list.
type syncedStore struct {
	cache.Store
	s *serviceCache
}

func (st *syncedStore) Replace(items []any, rv string) error {
	err := st.Store.Replace(items, rv)
	st.s.once.Do(func() { close(st.s.synced) })
	return err
}

func (s *serviceCache) run(ctx context.Context) { s.reflector.RunWithContext(ctx) }

// HasSynced reports whether the services were listed once.
func (s *serviceCache) HasSynced() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}

// List returns the services.
func (s *serviceCache) List() []any { return s.store.List() }

// WithClients returns o with its four API clients taken from c: a client
// with per-namespace accessors, such as nodekit.Client or a clientset's
// CoreV1().
func WithClients[S SecretClient, C ConfigMapClient, V ServiceClient, A ServiceAccountClient](o Options, c interface {
	Secrets(namespace string) S
	ConfigMaps(namespace string) C
	Services(namespace string) V
	ServiceAccounts(namespace string) A
}) Options {
	o.Secrets = func(ns string) SecretClient { return c.Secrets(ns) }
	o.ConfigMaps = func(ns string) ConfigMapClient { return c.ConfigMaps(ns) }
	o.Services = func(ns string) ServiceClient { return c.Services(ns) }
	o.ServiceAccounts = func(ns string) ServiceAccountClient { return c.ServiceAccounts(ns) }
	return o
}
