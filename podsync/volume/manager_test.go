package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
)

func TestOptionsBounds(t *testing.T) {
	if _, err := New(Options{SyncTimeout: 2 * time.Minute}); err == nil || err.Error() != "volume: Options.SyncTimeout 2m0s must be in [0s, 1m0s]" {
		t.Errorf("SyncTimeout out of bounds: %v", err)
	}
	if _, err := New(Options{SyncTimeout: -time.Second}); err == nil {
		t.Error("negative SyncTimeout accepted")
	}
}

// Secret and ConfigMap volumes: every key, or the items at their paths
// with their modes; the default mode; Secrets on a tmpfs, ConfigMaps on
// disk.
func TestSecretAndConfigMapVolumes(t *testing.T) {
	needRoot(t)
	f := newFixture(t, nil,
		secret("creds", map[string]string{"user": "admin", "pass": "s3cret"}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"app.conf": "x=1"}, BinaryData: map[string][]byte{"blob": {0, 1, 2}}})
	items := secretVol("items", "creds")
	items.Secret.Items = []corev1.KeyToPath{{Key: "pass", Path: "deep/password", Mode: ptr(int32(0o400))}}
	items.Secret.DefaultMode = ptr(int32(0o440))
	pod := newPod("web", secretVol("all", "creds"), items, configMapVol("cfg", "cfg"))
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	if got := f.read(pod, PluginSecret, "all", "user") + "/" + f.read(pod, PluginSecret, "all", "pass"); got != "admin/s3cret" {
		t.Errorf("secret volume: %q", got)
	}
	if m := f.mode(pod, PluginSecret, "all", "user"); m != 0o644 {
		t.Errorf("default mode %o, want 644", m)
	}
	if got, m := f.read(pod, PluginSecret, "items", "deep/password"), f.mode(pod, PluginSecret, "items", "deep/password"); got != "s3cret" || m != 0o400 {
		t.Errorf("item: %q mode %o", got, m)
	}
	if _, err := os.Stat(filepath.Join(f.dir(pod), "volumes", PluginSecret, "items", "user")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a key outside the items was written: %v", err)
	}
	if got := f.read(pod, PluginConfigMap, "cfg", "app.conf") + f.read(pod, PluginConfigMap, "cfg", "blob"); got != "x=1\x00\x01\x02" {
		t.Errorf("configMap volume: %q", got)
	}
	if mounted, _ := isMountPoint(filepath.Join(f.dir(pod), "volumes", PluginSecret, "all")); !mounted {
		t.Error("secret volume not on a tmpfs")
	}
	if mounted, _ := isMountPoint(filepath.Join(f.dir(pod), "volumes", PluginConfigMap, "cfg")); mounted {
		t.Error("configMap volume on a mount of its own")
	}
	for _, d := range []string{"volumes", "plugins"} {
		if fi, err := os.Stat(filepath.Join(f.dir(pod), d)); err != nil || !fi.IsDir() {
			t.Errorf("pod directory %s: %v", d, err)
		}
	}
	if p, ok := f.m.VolumePath(pod, f.dir(pod), &pod.Spec.Volumes[2]); !ok || p != filepath.Join(f.dir(pod), "volumes", PluginConfigMap, "cfg") {
		t.Errorf("VolumePath %q %v", p, ok)
	}
	if err := f.m.TearDownPod(context.Background(), pod, f.dir(pod)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.dir(pod)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod directory left: %v", err)
	}
	if mps, _ := mountsUnder(f.root); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
}

// A ConfigMap update reaches the mounted files through the shared watch,
// with no sync of the pod, and the pod's OnChange fires.
func TestConfigMapUpdateRefreshes(t *testing.T) {
	f := newFixture(t, nil, configMap("cfg", map[string]string{"k": "v1"}))
	pod := newPod("web", configMapVol("cfg", "cfg"))
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "watch in place", func() bool { return f.api.watching("configmaps") > 0 })
	if _, err := f.fake.CoreV1().ConfigMaps("ns").Update(context.Background(), configMap("cfg", map[string]string{"k": "v2", "new": "n"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "the update in the volume", func() bool {
		b, _ := os.ReadFile(filepath.Join(f.dir(pod), "volumes", PluginConfigMap, "cfg", "k"))
		return string(b) == "v2"
	})
	if got := f.read(pod, PluginConfigMap, "cfg", "new"); got != "n" {
		t.Errorf("new key: %q", got)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "OnChange", func() bool { return len(f.changedPods()) > 0 })
	if got := f.changedPods(); got[0] != pod.UID {
		t.Errorf("OnChange %v", got)
	}
	// Deleted while mounted: the last content stays, a FailedMount event
	// says why, and the pod is not stopped (SetUpPod succeeds).
	f.events()
	if err := f.fake.CoreV1().ConfigMaps("ns").Delete(context.Background(), "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "a FailedMount event for the deleted ConfigMap", func() bool {
		return hasEvent(f.events(), "FailedMount", `volume "cfg"`, "not found")
	})
	if err := f.setUp(pod); err != nil {
		t.Errorf("SetUpPod after the ConfigMap was deleted: %v", err)
	}
	if got := f.read(pod, PluginConfigMap, "cfg", "k"); got != "v2" {
		t.Errorf("content after delete: %q", got)
	}
}

// A pod whose Secret does not exist waits with FailedMount and starts as
// soon as it appears; another pod is not held up meanwhile.
func TestMissingSecretWaitsThenStarts(t *testing.T) {
	needRoot(t)
	f := newFixture(t, nil, configMap("other", map[string]string{"a": "b"}))
	waiting := newPod("waiting", secretVol("s", "later"))
	err := f.setUp(waiting)
	if !errors.Is(err, ErrMount) || !strings.Contains(err.Error(), `unmounted volumes=[s]`) || !strings.Contains(err.Error(), `secret "later" not found`) {
		t.Fatalf("SetUpPod: %v", err)
	}
	if ev := f.events(); !hasEvent(ev, "Warning FailedMount", `MountVolume.SetUp failed for volume "s" : secret "later" not found`) {
		t.Errorf("events %v", ev)
	}
	other := newPod("other", configMapVol("c", "other"))
	if err := f.setUp(other); err != nil {
		t.Fatalf("another pod: %v", err)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "watch in place", func() bool { return f.api.watching("secrets") > 0 })
	before := len(f.changedPods())
	if _, err := f.fake.CoreV1().Secrets("ns").Create(context.Background(), secret("later", map[string]string{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "OnChange for the waiting pod, and its set-up succeeds", func() bool {
		for _, uid := range f.changedPods()[before:] {
			if uid == waiting.UID {
				return f.setUp(waiting) == nil
			}
		}
		return false
	})
	if got := f.read(waiting, PluginSecret, "s", "k"); got != "v" {
		t.Errorf("secret: %q", got)
	}
}

// Optional sources that are missing: an empty volume, no error.
func TestOptionalMissing(t *testing.T) {
	needRoot(t)
	f := newFixture(t, nil, secret("partial", map[string]string{"a": "1"}))
	s := secretVol("s", "absent")
	s.Secret.Optional = ptr(true)
	c := configMapVol("c", "absent")
	c.ConfigMap.Optional = ptr(true)
	items := secretVol("items", "partial")
	items.Secret.Optional = ptr(true)
	items.Secret.Items = []corev1.KeyToPath{{Key: "a", Path: "a"}, {Key: "missing", Path: "m"}}
	pod := newPod("web", s, c, items)
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(f.dir(pod), "volumes", PluginSecret, "s"))
	if len(ents) != 2 { // ..data and its directory
		t.Errorf("optional missing secret: %v", ents)
	}
	if got := f.read(pod, PluginSecret, "items", "a"); got != "1" {
		t.Errorf("item: %q", got)
	}
	// A required item that is missing fails.
	required := *items.DeepCopy()
	required.Secret.Optional = nil
	bad := newPod("bad", required)
	if err := f.setUp(bad); !errors.Is(err, ErrMount) || !strings.Contains(err.Error(), "non-existent secret key: missing") {
		t.Errorf("missing required key: %v", err)
	}
}

// Downward-API files: name, namespace, labels and annotations as the
// kubelet formats them, a label, and container resources with divisors and
// the node's allocatable for an unset limit. A label change reaches the
// file at the next SetUpPod.
func TestDownwardAPIVolume(t *testing.T) {
	needRoot(t)
	f := newFixture(t, &Options{Allocatable: func() corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	}})
	vol := corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
		{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "app", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}, Mode: ptr(int32(0o600))},
		{Path: "cpu_limit_m", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "mem_request_mi", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}},
		{Path: "mem_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory"}},
	}}}}
	pod := newPod("web", vol)
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"name": "web", "ns": "ns", "labels": "app=\"web\"\ntier=\"a\\\"b\"", "app": "web",
		"cpu_limit_m": "250", "mem_request_mi": "100", "mem_limit": "8589934592"} {
		if got := f.read(pod, PluginDownwardAPI, "info", file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if m := f.mode(pod, PluginDownwardAPI, "info", "app"); m != 0o600 {
		t.Errorf("item mode %o", m)
	}
	upd := pod.DeepCopy()
	upd.Labels["app"] = "api"
	if err := f.setUp(upd); err != nil {
		t.Fatal(err)
	}
	if got := f.read(pod, PluginDownwardAPI, "info", "app"); got != "api" {
		t.Errorf("label after update: %q", got)
	}
}

// tokenAPI answers TokenRequests: token-<n>, expiring ttl after the fake
// clock's now (or refuses with err), and records the requests.
type tokenAPI struct {
	mu   sync.Mutex
	reqs []*authenticationv1.TokenRequest
	sa   []string
	err  error
}

func (f *fixture) tokenAPI(ttl func(requested int64) time.Duration) *tokenAPI {
	api := &tokenAPI{}
	f.fake.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		api.mu.Lock()
		defer api.mu.Unlock()
		if api.err != nil {
			return true, nil, api.err
		}
		api.reqs = append(api.reqs, tr.DeepCopy())
		api.sa = append(api.sa, a.GetNamespace()+"/"+ca.(k8stesting.CreateActionImpl).Name)
		tr.Status.Token = fmt.Sprintf("token-%d", len(api.reqs))
		tr.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(ttl(*tr.Spec.ExpirationSeconds)))
		return true, tr, nil
	})
	return api
}

func (a *tokenAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

// kubeAPIAccess is the projected volume the ServiceAccount admission
// plugin adds to pods: a token, kube-root-ca.crt and the namespace.
func kubeAPIAccess(expiration *int64, audience string) corev1.Volume {
	return corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr(int32(0o644)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: expiration, Audience: audience}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}}
}

// A projected service-account token: requested as the pod's service
// account, bound to the pod, with the audience and lifetime asked for;
// refreshed at 80% of its lifetime on the fake clock (jitter up to 10s
// earlier), not before.
func TestProjectedTokenRefresh(t *testing.T) {
	needRoot(t)
	var api *tokenAPI
	f := newFixtureWith(t, nil, func(f *fixture) {
		api = f.tokenAPI(func(s int64) time.Duration { return time.Duration(s) * time.Second })
	},
		configMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"}))
	pod := newPod("web", kubeAPIAccess(ptr(int64(3600)), "vault"))
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	if got := f.read(pod, PluginProjected, "kube-api-access", "token"); got != "token-1" {
		t.Errorf("token %q", got)
	}
	if got := f.read(pod, PluginProjected, "kube-api-access", "ca.crt") + " " + f.read(pod, PluginProjected, "kube-api-access", "namespace"); got != "CA ns" {
		t.Errorf("ca.crt and namespace: %q", got)
	}
	req := api.reqs[0]
	if api.sa[0] != "ns/sa" || req.Spec.BoundObjectRef == nil || req.Spec.BoundObjectRef.Kind != "Pod" || req.Spec.BoundObjectRef.UID != pod.UID ||
		req.Spec.BoundObjectRef.Name != "web" || len(req.Spec.Audiences) != 1 || req.Spec.Audiences[0] != "vault" || *req.Spec.ExpirationSeconds != 3600 {
		t.Errorf("token request %s %+v", api.sa[0], req.Spec)
	}
	wait, err := f.m.SyncOnce(context.Background())
	if err != nil || wait != 48*time.Minute {
		t.Errorf("SyncOnce: next refresh in %v (%v), want 48m", wait, err)
	}
	// Just before the jitter window: still the first token.
	f.clock.Step(48*time.Minute - 11*time.Second)
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	if api.count() != 1 {
		t.Errorf("%d token requests before 80%% of the lifetime", api.count())
	}
	// At 80%: Run's timer fires and the token file is rewritten.
	f.clock.Step(11 * time.Second)
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "the refreshed token in the volume", func() bool {
		b, _ := os.ReadFile(filepath.Join(f.dir(pod), "volumes", PluginProjected, "kube-api-access", "token"))
		return string(b) == "token-2"
	})
	// The API refuses a refresh while the token is valid: the old one stays.
	api.mu.Lock()
	api.err = apierrors.NewForbidden(authenticationv1.Resource("serviceaccounts/token"), "sa", errors.New("no"))
	api.mu.Unlock()
	f.clock.Step(48 * time.Minute)
	if _, err := f.m.SyncOnce(context.Background()); err != nil {
		t.Errorf("refresh refused while the token is valid: %v", err)
	}
	if got := f.read(pod, PluginProjected, "kube-api-access", "token"); got != "token-2" {
		t.Errorf("token after a refused refresh: %q", got)
	}
	if err := f.m.TearDownPod(context.Background(), pod, f.dir(pod)); err != nil {
		t.Fatal(err)
	}
	if next, _ := f.m.SyncOnce(context.Background()); next >= 0 {
		t.Errorf("a refresh scheduled after tear-down: %v", next)
	}
}

// A token whose lifetime is longer than a day is refreshed after 24h.
func TestTokenRefreshAfter24h(t *testing.T) {
	needRoot(t)
	f := newFixtureWith(t, nil, func(f *fixture) { f.tokenAPI(func(s int64) time.Duration { return time.Duration(s) * time.Second }) },
		configMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"}))
	pod := newPod("web", kubeAPIAccess(ptr(int64(7*24*3600)), ""))
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	if wait, _ := f.m.SyncOnce(context.Background()); wait != 24*time.Hour {
		t.Errorf("next refresh in %v, want 24h", wait)
	}
}

// A refused TokenRequest for a new pod: FailedMount, the pod waits.
func TestTokenRefused(t *testing.T) {
	var api *tokenAPI
	f := newFixtureWith(t, nil, func(f *fixture) {
		api = f.tokenAPI(func(s int64) time.Duration { return time.Duration(s) * time.Second })
	},
		configMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"}))
	api.err = apierrors.NewForbidden(authenticationv1.Resource("serviceaccounts/token"), "sa", errors.New("not allowed"))
	pod := newPod("web", kubeAPIAccess(nil, ""))
	err := f.setUp(pod)
	if !errors.Is(err, ErrMount) || !strings.Contains(err.Error(), "failed to fetch token for service account ns/sa") {
		t.Fatalf("SetUpPod: %v", err)
	}
	if ev := f.events(); !hasEvent(ev, "FailedMount", `volume "kube-api-access"`, "forbidden") {
		t.Errorf("events %v", ev)
	}
}

// Bad input: paths with "..", keys that are not file names, conflicting
// projected paths, a 1 MiB Secret; nothing is written outside the pod's
// directory.
func TestBadInput(t *testing.T) {
	needRoot(t)
	big := strings.Repeat("x", 1<<20)
	f := newFixture(t, nil,
		secret("s", map[string]string{"ok": "1", "..sneaky": "2"}),
		secret("big", map[string]string{"blob": big}),
		configMap("c", map[string]string{"ok": "3"}))
	dotdot := secretVol("v", "s")
	dotdot.Secret.Items = []corev1.KeyToPath{{Key: "ok", Path: "a/../../../escape"}}
	abs := configMapVol("v", "c")
	abs.ConfigMap.Items = []corev1.KeyToPath{{Key: "ok", Path: "/etc/escape"}}
	conflict := corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Items: []corev1.KeyToPath{{Key: "ok", Path: "same"}}}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Items: []corev1.KeyToPath{{Key: "ok", Path: "same"}}}},
	}}}}
	dirClash := conflict.DeepCopy()
	dirClash.Projected.Sources[1].ConfigMap.Items[0].Path = "same/below"
	for name, tc := range map[string]struct {
		vol  corev1.Volume
		want string
	}{
		"dotdot":    {dotdot, "contains '..'"},
		"absolute":  {abs, "is absolute"},
		"badkey":    {secretVol("v", "s"), "starts with '..'"},
		"conflict":  {conflict, "conflicting duplicate paths: same"},
		"dir-clash": {*dirClash, "conflicting paths"},
	} {
		pod := newPod(name, tc.vol)
		err := f.setUp(pod)
		if !errors.Is(err, ErrMount) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if ev := f.events(); !hasEvent(ev, "FailedMount", tc.want) {
			t.Errorf("%s: events %v", name, ev)
		}
	}
	pod := newPod("big", secretVol("v", "big"))
	if err := f.setUp(pod); err != nil {
		t.Fatalf("1 MiB secret: %v", err)
	}
	if got := f.read(pod, PluginSecret, "v", "blob"); got != big {
		t.Errorf("1 MiB secret: %d bytes", len(got))
	}
	// Only the pods' directories exist below the root.
	ents, _ := os.ReadDir(f.root)
	if len(ents) != 1 || ents[0].Name() != "pods" {
		t.Errorf("root holds %v", ents)
	}
	err := filepath.WalkDir(filepath.Join(f.root, "pods"), func(p string, d fs.DirEntry, err error) error {
		if strings.Contains(p, "escape") {
			t.Errorf("written: %s", p)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	for _, name := range []string{"dotdot", "absolute", "badkey", "conflict", "dir-clash", "big"} {
		p := newPod(name)
		if err := f.m.TearDownPod(context.Background(), p, f.dir(p)); err != nil {
			t.Error(err)
		}
	}
	if mps, _ := mountsUnder(f.root); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
}

// Many pods that use one ConfigMap share one watch: one LIST and one
// WATCH; the watch stops with the last pod.
func TestSharedWatch(t *testing.T) {
	f := newFixture(t, nil, configMap("shared", map[string]string{"k": "v"}))
	var pods []*corev1.Pod
	for i := range 50 {
		p := newPod(fmt.Sprintf("p%d", i), configMapVol("c", "shared"))
		p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}
		if err := f.setUp(p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	if n := f.m.Watches(); n != 1 {
		t.Errorf("%d watches for 50 pods of one ConfigMap", n)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "watch in place", func() bool { return f.api.watching("configmaps") > 0 })
	f.api.mu.Lock()
	lists, watches := f.api.lists["configmaps"], f.api.watches["configmaps"]
	f.api.mu.Unlock()
	if lists != 1 || watches != 1 {
		t.Errorf("%d LISTs and %d WATCHes, want 1 and 1", lists, watches)
	}
	for _, p := range pods[:49] {
		if err := f.m.TearDownPod(context.Background(), p, f.dir(p)); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.m.Watches(); n != 1 {
		t.Errorf("%d watches with one pod left", n)
	}
	if err := f.m.TearDownPod(context.Background(), pods[49], f.dir(pods[49])); err != nil {
		t.Fatal(err)
	}
	if n := f.m.Watches(); n != 0 {
		t.Errorf("%d watches after the last pod", n)
	}
}

// The node may not read an object: the watch's list error is the pod's
// FailedMount, and the pod starts once the object becomes readable.
func TestForbiddenObject(t *testing.T) {
	needRoot(t)
	var mu sync.Mutex
	forbidden := true
	f := newFixtureWith(t, nil, func(f *fixture) {
		f.fake.PrependReactor("list", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if forbidden {
				return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "", errors.New(`no relationship found between node 'n1' and this object`))
			}
			return false, nil, nil
		})
	})
	pod := newPod("web", secretVol("s", "theirs"))
	err := f.setUp(pod)
	if !errors.Is(err, ErrMount) || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "no relationship found") {
		t.Fatalf("SetUpPod: %v", err)
	}
	if ev := f.events(); !hasEvent(ev, "FailedMount", "forbidden") {
		t.Errorf("events %v", ev)
	}
	mu.Lock()
	forbidden = false
	mu.Unlock()
	if _, err := f.fake.CoreV1().Secrets("ns").Create(context.Background(), secret("theirs", map[string]string{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The reflector lists again after its back-off (about a second).
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "SetUpPod succeeds once the Secret is readable", func() bool { return f.setUp(pod) == nil })
}

// Memory-backed emptyDir: a tmpfs with the size limit, unmounted and
// removed at tear-down.
func TestEmptyDirMemory(t *testing.T) {
	needRoot(t)
	var alloc atomic.Pointer[corev1.ResourceList]
	f := newFixture(t, &Options{Allocatable: func() corev1.ResourceList {
		if a := alloc.Load(); a != nil {
			return *a
		}
		return nil
	}})
	size := resource.MustParse("16Mi")
	pod := newPod("web", corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
		corev1.Volume{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.dir(pod), "volumes", PluginEmptyDir, "cache")
	mps, err := mountsUnder(f.dir(pod))
	if err != nil || len(mps) != 1 || mps[0] != dir {
		t.Fatalf("mounts %v %v", mps, err)
	}
	if typ, opts := mountInfo(t, dir); typ != "tmpfs" || !strings.Contains(opts, "size=16384k") {
		t.Errorf("mount type %s options %s", typ, opts)
	}
	if _, ok := f.m.VolumePath(pod, f.dir(pod), &pod.Spec.Volumes[1]); ok {
		t.Error("disk emptyDir claimed")
	}
	// Without a sizeLimit: the pod's memory limit, else the allocatable.
	noLimit := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	if got := f.m.memoryVolumeSize(pod, noLimit); got != 0 {
		t.Errorf("size with nothing known: %d", got)
	}
	alloc.Store(&corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")})
	if got := f.m.memoryVolumeSize(pod, noLimit); got != 1<<30 {
		t.Errorf("size from the allocatable: %d", got)
	}
	limited := pod.DeepCopy()
	limited.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	if got := f.m.memoryVolumeSize(limited, noLimit); got != 64<<20 {
		t.Errorf("size from the pod's limit: %d", got)
	}
	if got := f.m.memoryVolumeSize(limited, pod.Spec.Volumes[0].EmptyDir); got != 16<<20 {
		t.Errorf("size from the sizeLimit: %d", got)
	}
	// Set up again (every sync does): not mounted twice.
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	if mps, _ := mountsUnder(f.dir(pod)); len(mps) != 1 {
		t.Errorf("mounts after a second set-up: %v", mps)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.m.TearDownPod(context.Background(), pod, f.dir(pod)); err != nil {
		t.Fatal(err)
	}
	if mps, _ := mountsUnder(f.root); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
	if _, err := os.Stat(f.dir(pod)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod directory left: %v", err)
	}
}

// mountInfo returns the filesystem type and super options of the mount at
// dir.
func mountInfo(t *testing.T, dir string) (string, string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 9 && fields[4] == dir {
			for i, f := range fields {
				if f == "-" && i+3 < len(fields) {
					return fields[i+1], fields[i+3]
				}
			}
		}
	}
	return "", ""
}

// Static pods may not reference API objects: a clear error, no request.
func TestStaticPodRefused(t *testing.T) {
	f := newFixture(t, nil, secret("s", map[string]string{"k": "v"}))
	pod := newPod("static", secretVol("s", "s"))
	pod.Annotations = map[string]string{podsource.ConfigSourceAnnotation: podsource.FileSource}
	if err := f.setUp(pod); !errors.Is(err, ErrStaticPodReference) {
		t.Errorf("SetUpPod: %v", err)
	}
	if ev := f.events(); !hasEvent(ev, "Warning FailedMount", "static pods may not reference API objects") {
		t.Errorf("events %v", ev)
	}
	if n := f.m.Watches(); n != 0 {
		t.Errorf("%d watches for a static pod", n)
	}
	// A static pod without references is fine.
	plain := newPod("plain")
	plain.Annotations = pod.Annotations
	if err := f.setUp(plain); err != nil {
		t.Errorf("plain static pod: %v", err)
	}
}

// Without a client (standalone), pods that reference API objects wait;
// others are set up.
func TestNoClient(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.SetUpPod(context.Background(), newPod("web", secretVol("s", "s")), filepath.Join(dir, "a")); !errors.Is(err, ErrMount) {
		t.Errorf("secret without a client: %v", err)
	}
	if err := m.SetUpPod(context.Background(), newPod("plain"), filepath.Join(dir, "b")); err != nil {
		t.Errorf("plain pod: %v", err)
	}
	// The API clients come together.
	o := withAPI(Options{}, newFixtureClient())
	o.Services = nil
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "Options.Services") {
		t.Errorf("without Services: %v", err)
	}
}

// Over a simulated day on the fake clock, a pod's 1h token is requested
// once and then refreshed every 48 minutes (jitter aside): 30 refreshes.
func TestTokenRequestsPerDay(t *testing.T) {
	needRoot(t)
	var api *tokenAPI
	f := newFixtureWith(t, nil, func(f *fixture) {
		api = f.tokenAPI(func(s int64) time.Duration { return time.Duration(s) * time.Second })
	},
		configMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"}))
	pod := newPod("web", kubeAPIAccess(nil, ""))
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	for range 24 * 60 {
		f.clock.Step(time.Minute)
		if _, err := f.m.SyncOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := api.count() - 1; n < 30 || n > 31 {
		t.Errorf("%d refreshes in 24h, want 30 (31 with the jitter)", n)
	}
	t.Logf("token requests in a simulated day: %d (1 + %d refreshes)", api.count(), api.count()-1)
}

// A token is owned by the user all the pod's containers run as, mode
// 0600; with an fsGroup it is 0640 with that group; with containers of
// different users, or one without a user, it keeps the volume's mode and
// the writer's ownership, as the kubelet writes it.
func TestProjectedTokenOwnership(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name     string
		mod      func(p *corev1.Pod)
		uid, gid uint32
		mode     os.FileMode
	}{
		{"no user", func(*corev1.Pod) {}, 0, 0, 0o644},
		{"pod user", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000))}
		}, 1000, 0, 0o600},
		{"container users agree", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000))}
			p.Spec.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(1000))}}}
		}, 1000, 0, 0o600},
		{"container users differ", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000))}
			p.Spec.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(2000))}}}
		}, 0, 0, 0o644},
		{"fsGroup", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr(int64(3000))}
		}, 0, 3000, 0o640},
		{"user and fsGroup", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000)), FSGroup: ptr(int64(3000))}
		}, 1000, 3000, 0o640},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureWith(t, nil, func(f *fixture) { f.tokenAPI(func(s int64) time.Duration { return time.Duration(s) * time.Second }) },
				configMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"}))
			pod := newPod("web", kubeAPIAccess(ptr(int64(3600)), ""))
			tc.mod(pod)
			if err := f.setUp(pod); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(f.dir(pod), "volumes", PluginProjected, "kube-api-access")
			fi, err := os.Stat(filepath.Join(dir, "token"))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if st.Uid != tc.uid || st.Gid != tc.gid || fi.Mode().Perm() != tc.mode {
				t.Errorf("token: uid %d gid %d mode %v; want %d %d %v", st.Uid, st.Gid, fi.Mode().Perm(), tc.uid, tc.gid, tc.mode)
			}
			if fi, err := os.Stat(filepath.Join(dir, "ca.crt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("ca.crt: %v %v; want owned by the writer", fi, err)
			}
		})
	}
}
