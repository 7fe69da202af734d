package volume

import (
	"context"
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// stubAPI serves each ConfigMap from memory with a watch that never sends,
// so a benchmark measures the Manager's side of a watch alone.
type stubAPI struct {
	corev1client.CoreV1Interface
	data string
}

type stubConfigMaps struct {
	corev1client.ConfigMapInterface
	ns, data string
}

type stubServices struct{ corev1client.ServiceInterface }

func (stubServices) List(context.Context, metav1.ListOptions) (*corev1.ServiceList, error) {
	return &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
}

func (stubServices) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func (s stubAPI) Services(string) corev1client.ServiceInterface { return stubServices{} }

func (s stubAPI) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return stubConfigMaps{ns: ns, data: s.data}
}

func (s stubConfigMaps) List(_ context.Context, o metav1.ListOptions) (*corev1.ConfigMapList, error) {
	name := strings.TrimPrefix(o.FieldSelector, "metadata.name=")
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.ConfigMap{{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, ResourceVersion: "1"}, Data: map[string]string{"k": s.data}}}}, nil
}

func (s stubConfigMaps) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// BenchmarkWatchedObject measures the memory one watched object costs the
// Manager: its reflector goroutine, the object (a 1 KiB ConfigMap) and the
// bookkeeping, over 1,000 objects, reported as B/object (heap) and
// stack-B/object (goroutine stacks).
func BenchmarkWatchedObject(b *testing.B) {
	const objects = 1000
	for range b.N {
		m, err := New(withAPI(Options{}, stubAPI{data: strings.Repeat("x", 1024)}))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		ws := make([]*watched, 0, objects)
		for i := range objects {
			w, err := m.objects.acquire(objectKey{kind: kindConfigMap, namespace: "ns", name: fmt.Sprintf("cm-%d", i)}, types.UID(fmt.Sprintf("pod-%d", i)))
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, w)
		}
		deadline := time.Now().Add(time.Minute)
		for _, w := range ws {
			select {
			case <-w.settled:
			case <-time.After(time.Until(deadline)):
				b.Fatal("objects not listed within a minute")
			}
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/objects, "B/object")
		b.ReportMetric(float64(after.StackInuse-before.StackInuse)/objects, "stack-B/object")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetUpPod measures one sync's set-up of a pod whose Secret,
// ConfigMap and downward-API volumes are unchanged (the steady state: the
// atomic writer compares and writes nothing).
func BenchmarkSetUpPod(b *testing.B) {
	needRoot(b)
	f := newBenchFixture(b)
	pod := newPod("web", secretVol("s", "s"), configMapVol("c", "c"),
		corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}})
	dir := filepath.Join(b.TempDir(), "pod")
	defer func() {
		if err := f.TearDownPod(context.Background(), pod, dir); err != nil {
			b.Error(err)
		}
	}()
	if err := f.SetUpPod(context.Background(), pod, dir); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := f.SetUpPod(context.Background(), pod, dir); err != nil {
			b.Fatal(err)
		}
	}
}

func newBenchFixture(b *testing.B) *Manager {
	client := &hooked{CoreV1Interface: newFixtureClientWith(secret("s", map[string]string{"a": "1", "b": "2"}), configMap("c", map[string]string{"k": "v"})),
		lists: map[string]int{}, watches: map[string]int{}}
	m, err := New(withAPI(Options{}, client))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	return m
}
