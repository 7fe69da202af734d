package volume

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
)

const waitTimeout = 10 * time.Second

// needRoot skips a test that mounts tmpfs volumes unless it runs as root
// (under NODEKIT_REQUIRE_ALL=1 it fails instead).
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to mount tmpfs volumes)", "test", fmt.Errorf("euid %d", os.Geteuid()))
	}
}

// hooked wraps the fake clientset's core/v1 client: it counts the
// Manager's list and watch requests by resource and tells when a watch is
// in place (the fake clientset drops events sent before).
type hooked struct {
	corev1client.CoreV1Interface

	mu      sync.Mutex
	lists   map[string]int
	watches map[string]int
}

func (h *hooked) count(m map[string]int, what string) {
	h.mu.Lock()
	m[what]++
	h.mu.Unlock()
}

func (h *hooked) watching(what string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watches[what]
}

type hookedSecrets struct {
	corev1client.SecretInterface
	h *hooked
}

func (s hookedSecrets) List(ctx context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	s.h.count(s.h.lists, "secrets")
	return s.SecretInterface.List(ctx, o)
}

func (s hookedSecrets) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := s.SecretInterface.Watch(ctx, o)
	s.h.count(s.h.watches, "secrets")
	return w, err
}

type hookedConfigMaps struct {
	corev1client.ConfigMapInterface
	h *hooked
}

func (s hookedConfigMaps) List(ctx context.Context, o metav1.ListOptions) (*corev1.ConfigMapList, error) {
	s.h.count(s.h.lists, "configmaps")
	return s.ConfigMapInterface.List(ctx, o)
}

func (s hookedConfigMaps) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := s.ConfigMapInterface.Watch(ctx, o)
	s.h.count(s.h.watches, "configmaps")
	return w, err
}

func (h *hooked) Secrets(ns string) corev1client.SecretInterface {
	return hookedSecrets{h.CoreV1Interface.Secrets(ns), h}
}

func (h *hooked) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return hookedConfigMaps{h.CoreV1Interface.ConfigMaps(ns), h}
}

type fixture struct {
	t       *testing.T
	fake    *fake.Clientset
	api     *hooked
	clock   *clocktesting.FakeClock
	rec     *record.FakeRecorder
	m       *Manager
	root    string
	mu      sync.Mutex
	changed []types.UID
}

// newFixture runs a Manager on the fake clientset (holding objs) under a
// fake clock, and checks at the end that Run returned and left no
// goroutine behind and that no mount is left below the root.
func newFixture(t *testing.T, opts *Options, objs ...runtime.Object) *fixture {
	return newFixtureWith(t, opts, nil, objs...)
}

// newFixtureWith is newFixture with prep called before the Manager runs
// (the fake clientset's reactors may not change while it is in use).
func newFixtureWith(t *testing.T, opts *Options, prep func(*fixture), objs ...runtime.Object) *fixture {
	t.Helper()
	snap := leakcheck.Take()
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(t0), rec: record.NewFakeRecorder(1000), root: t.TempDir()}
	f.fake = fake.NewSimpleClientset(objs...)
	f.api = &hooked{CoreV1Interface: f.fake.CoreV1(), lists: map[string]int{}, watches: map[string]int{}}
	if prep != nil {
		prep(f)
	}
	t.Cleanup(func() {
		if err := unmountAll(f.root); err != nil {
			t.Errorf("unmounting what a test left: %v", err)
		}
	})
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o = withAPI(o, f.api)
	o.Clock, o.Recorder = f.clock, f.rec
	o.OnChange = func(uid types.UID) {
		f.mu.Lock()
		f.changed = append(f.changed, uid)
		f.mu.Unlock()
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "Run started", func() bool {
		m.objects.mu.Lock()
		defer m.objects.mu.Unlock()
		return m.objects.ctx != nil
	})
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		snap.Verify(t)
	})
	return f
}

func (f *fixture) changedPods() []types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]types.UID(nil), f.changed...)
}

func (f *fixture) dir(pod *corev1.Pod) string { return filepath.Join(f.root, "pods", string(pod.UID)) }

func (f *fixture) setUp(pod *corev1.Pod) error {
	return f.m.SetUpPod(context.Background(), pod, f.dir(pod))
}

func (f *fixture) read(pod *corev1.Pod, plugin, vol, file string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir(pod), "volumes", plugin, vol, file))
	if err != nil {
		f.t.Fatalf("reading %s/%s/%s: %v", plugin, vol, file, err)
	}
	return string(b)
}

func (f *fixture) mode(pod *corev1.Pod, plugin, vol, file string) os.FileMode {
	f.t.Helper()
	fi, err := os.Stat(filepath.Join(f.dir(pod), "volumes", plugin, vol, file))
	if err != nil {
		f.t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// events drains the recorder.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, parts ...string) bool {
	for _, e := range events {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e, p)
		}
		if all {
			return true
		}
	}
	return false
}

func newPod(name string, vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web", "tier": "a\"b"}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa", Volumes: vols,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

func secretVol(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
}

func configMapVol(name, cm string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: data}
}

func ptr[T any](v T) *T { return &v }

// newFixtureClient is a fake core/v1 client for a Manager that does not run.
func newFixtureClient() testClient { return fake.NewSimpleClientset().CoreV1() }

// testClient is a core/v1 client as the tests build them: client-go's
// getters of the four resources the Manager uses.
type testClient interface {
	corev1client.SecretsGetter
	corev1client.ConfigMapsGetter
	corev1client.ServicesGetter
	corev1client.ServiceAccountsGetter
}

// withAPI returns o with its API clients taken from c.
func withAPI(o Options, c testClient) Options {
	o.Secrets = func(ns string) SecretClient { return c.Secrets(ns) }
	o.ConfigMaps = func(ns string) ConfigMapClient { return c.ConfigMaps(ns) }
	o.Services = func(ns string) ServiceClient { return c.Services(ns) }
	o.ServiceAccounts = func(ns string) ServiceAccountClient { return c.ServiceAccounts(ns) }
	return o
}

// newFixtureClientWith is the fake core/v1 client holding objs.
func newFixtureClientWith(objs ...runtime.Object) corev1client.CoreV1Interface {
	return fake.NewSimpleClientset(objs...).CoreV1()
}
