package nodekit_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync"
)

// nodeSource is a registered Node.
type nodeSource struct{ node *corev1.Node }

func (n nodeSource) Node() *corev1.Node { return n.node }

// TestPodHalfMirrorPodFirst: as the kubelet, the pod half creates a static
// pod's mirror pod before the pod's first sync: a static pod written while
// the half runs reaches its syncer only once its mirror pod's create has
// returned, even when the create is slow.
func TestPodHalfMirrorPodFirst(t *testing.T) {
	dir := t.TempDir()
	manifest := func(name string) {
		t.Helper()
		body := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: default\nspec:\n  containers:\n  - name: app\n    image: busybox\n"
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid", Labels: map[string]string{corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}
	cs := fake.NewClientset(node)

	// The mirror pod of "web" is created only when the test lets it.
	var mu sync.Mutex
	created := map[string]bool{} // mirror pods whose create returned
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).Name
		if name == "web-n1" {
			once.Do(func() { close(entered) }) // a create asked again does not block here
			<-release
		}
		mu.Lock()
		created[name] = true
		mu.Unlock()
		return false, nil, nil // the tracker creates it
	})
	firstSync := map[string]bool{} // static pod (<name>-<node>) → its mirror pod existed at its first sync
	syncer := podsync.SyncerFuncs{Sync: func(_ context.Context, pod *corev1.Pod, _ *podsync.PodState) (podsync.SyncResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := firstSync[pod.Name]; !ok {
			firstSync[pod.Name] = created[pod.Name]
		}
		return podsync.SyncResult{}, nil
	}}
	p, err := nodekit.NewPodHalf(nodekit.PodHalfOptions{NodeName: "n1", ManifestPath: dir, HostIPs: []string{"192.0.2.1"},
		API:  &nodekit.API{Nodes: cs.CoreV1().Nodes(), Pods: func(ns string) nodekit.PodClient { return cs.CoreV1().Pods(ns) }},
		Node: nodeSource{node},
		Backend: func(podsync.BackendParts) (podsync.Backend, error) {
			return podsync.Backend{Syncer: syncer, Relister: relistNothing{}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := runPodHalf(t, p)
	synced := func(name string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			_, ok := firstSync[name]
			return ok
		}
	}
	// A first static pod: its mirror pod shows that mirror pods run.
	manifest("warm")
	testenv.Eventually(t, 30*time.Second, 5*time.Millisecond, "warm synced", synced("warm-n1"))
	testenv.Eventually(t, 30*time.Second, 5*time.Millisecond, "warm's mirror pod", func() bool {
		_, err := cs.CoreV1().Pods("default").Get(ctx, "warm-n1", metav1.GetOptions{})
		return err == nil
	})

	manifest("web")
	testenv.Receive(t, entered, 30*time.Second, "web's mirror pod create")
	close(release)
	testenv.Eventually(t, 30*time.Second, 5*time.Millisecond, "web synced", synced("web-n1"))
	mu.Lock()
	defer mu.Unlock()
	if !firstSync["web-n1"] {
		t.Error("web's first sync came before its mirror pod's create returned")
	}
}
