package podsource

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.Main(m, &cp)) }

// integrationNode registers a Node as the node itself and returns its client.
func integrationNode(t *testing.T, name string) (kubernetes.Interface, *v1.Node) {
	t.Helper()
	cp := controlplane.Need(t, cp)
	client, err := cp.NodeClient(name)
	if err != nil {
		t.Fatal(err)
	}
	node, err := client.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.AdminClient().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return client, node
}

// waitFor drains updates until one matches, failing after waitTimeout.
func waitFor(t *testing.T, ch <-chan Update, what string, match func(Update) bool) Update {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case u := <-ch:
			t.Logf("update %s", describe(u))
			if match(u) {
				return u
			}
		case <-deadline:
			t.Fatalf("no %s within %v", what, waitTimeout)
		}
	}
}

func has(op Op, source, name string) func(Update) bool {
	return func(u Update) bool {
		if u.Op != op || u.Source != source {
			return false
		}
		for _, p := range u.Pods {
			if p.Name == name {
				return true
			}
		}
		return false
	}
}

func TestIntegrationSourcesAndMirrorPods(t *testing.T) {
	const nodeName = "podsource-n1"
	nodeClient, node := integrationNode(t, nodeName)
	admin := cp.AdminClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dir := t.TempDir()
	webPath := filepath.Join(dir, "web.yaml")
	writeAtomic(t, webPath, manifest("web", "registry.example/web:1"))

	file, err := NewFile(FileOptions{Path: dir, NodeName: nodeName})
	if err != nil {
		t.Fatal(err)
	}
	api, err := NewAPI(APIOptions{Pods: nodeClient.CoreV1().Pods(metav1.NamespaceAll), NodeName: nodeName})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMerger(MergerOptions{Sources: []PodSource{file, api}})
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(nodeClient.CoreV1()), Nodes: nodeClient.CoreV1().Nodes(), NodeName: nodeName, StaticPods: m.StaticPods})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	ch := m.Updates()
	webName := "web-" + nodeName

	waitFor(t, ch, "static pod ADD", has(OpAdd, FileSource, webName))
	select {
	case <-m.SeenAllSourcesC():
	case <-time.After(waitTimeout):
		t.Fatal("api source never seen")
	}

	// A pod scheduled to the node arrives through the API source.
	pods := admin.CoreV1().Pods("default")
	apiPod := testPod("scheduled", "")
	apiPod.Spec.NodeName = nodeName
	if _, err := pods.Create(ctx, apiPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "api pod ADD", has(OpAdd, APISource, "scheduled"))
	// A pod on another node does not.
	elsewhere := testPod("elsewhere", "")
	elsewhere.Spec.NodeName = "some-other-node"
	if _, err := pods.Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Mirror pod, written as system:node:<name> under NodeRestriction.
	sync := func() {
		t.Helper()
		if err := mirrors.SyncOnce(ctx); err != nil {
			t.Fatalf("SyncOnce: %v", err)
		}
	}
	sync()
	mirror, err := pods.Get(ctx, webName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	static := m.StaticPods()[0]
	if mirror.Annotations[ConfigMirrorAnnotation] != static.Annotations[ConfigHashAnnotation] {
		t.Errorf("mirror hash %q, static hash %q", mirror.Annotations[ConfigMirrorAnnotation], static.Annotations[ConfigHashAnnotation])
	}
	if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].UID != node.UID || refs[0].Kind != "Node" {
		t.Errorf("owner references %+v", refs)
	}
	// The mirror pod comes back through the API source, and is not taken
	// for a duplicate of the static pod.
	waitFor(t, ch, "mirror pod ADD", has(OpAdd, APISource, webName))
	if got := len(m.Pods(FileSource)); got != 1 {
		t.Errorf("%d file pods after the mirror pod arrived", got)
	}

	// In step: the mirror pod is left alone.
	sync()
	again, err := pods.Get(ctx, webName, metav1.GetOptions{})
	if err != nil || again.UID != mirror.UID {
		t.Fatalf("mirror pod replaced while in step: %v", err)
	}

	// Deleted by an admin: recreated.
	if err := pods.Delete(ctx, webName, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 5*time.Millisecond, "mirror pod gone", func() bool {
		_, err := pods.Get(ctx, webName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	sync()
	recreated, err := pods.Get(ctx, webName, metav1.GetOptions{})
	if err != nil || recreated.UID == mirror.UID {
		t.Fatalf("mirror pod not recreated: %v", err)
	}

	// The manifest changes: the mirror pod is replaced to match.
	writeAtomic(t, webPath, manifest("web", "registry.example/web:2"))
	waitFor(t, ch, "edited static pod ADD", has(OpAdd, FileSource, webName))
	sync()
	replaced, err := pods.Get(ctx, webName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if replaced.UID == recreated.UID || replaced.Spec.Containers[0].Image != "registry.example/web:2" ||
		replaced.Annotations[ConfigMirrorAnnotation] != m.StaticPods()[0].Annotations[ConfigHashAnnotation] {
		t.Errorf("mirror pod not replaced: uid %s image %s", replaced.UID, replaced.Spec.Containers[0].Image)
	}

	// An orphaned mirror pod (its static pod gone while the agent was down)
	// is cleaned up; pods that are not mirror pods are not touched.
	orphan := testPod("gone-"+nodeName, "")
	orphan.Spec.NodeName = nodeName
	orphan.Annotations = map[string]string{ConfigMirrorAnnotation: "0123"}
	if _, err := pods.Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sync()
	if _, err := pods.Get(ctx, orphan.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("orphaned mirror pod still there: %v", err)
	}
	if _, err := pods.Get(ctx, "scheduled", metav1.GetOptions{}); err != nil {
		t.Errorf("regular pod touched: %v", err)
	}

	// The manifest is removed: so is the mirror pod.
	if err := os.Remove(webPath); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "static pod REMOVE", has(OpRemove, FileSource, webName))
	sync()
	if _, err := pods.Get(ctx, webName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("mirror pod of a removed static pod still there: %v", err)
	}
}

// TestIntegrationNodeRestriction checks what the node identity may not do,
// so the mirror pod rules above are known to be enforced.
func TestIntegrationNodeRestriction(t *testing.T) {
	const nodeName = "podsource-n2"
	nodeClient, node := integrationNode(t, nodeName)
	ctx := context.Background()
	static := staticPod(t, "guard", "guard:1")
	static.Spec.NodeName = nodeName
	pods := nodeClient.CoreV1().Pods("default")

	// Without the mirror annotation: refused.
	plain := MirrorPodFor(static, nodeName, node.UID)
	delete(plain.Annotations, ConfigMirrorAnnotation)
	if _, err := pods.Create(ctx, plain, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("non-mirror pod created by the node: %v", err)
	}
	// With a wrong owner UID: refused.
	wrong := MirrorPodFor(static, nodeName, types.UID("not-the-node"))
	if _, err := pods.Create(ctx, wrong, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "UID mismatch") {
		t.Errorf("mirror pod with a wrong owner UID: %v", err)
	}
	// For another node: refused.
	other := MirrorPodFor(static, nodeName, node.UID)
	other.Spec.NodeName = "another-node"
	if _, err := pods.Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("mirror pod for another node: %v", err)
	}
	// Listing every pod: refused; with the node's field selector: allowed.
	if _, err := nodeClient.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node listed all pods: %v", err)
	}
	// MirrorPods with a caller's node UID getter creates and cleans up.
	mp, set := syncMirrorPod(t, nodeClient, node, static)
	if err := set.sync(ctx, mp); err != nil {
		t.Fatalf("SyncOnce cleaning up: %v", err)
	}
}

// syncMirrorPod creates the static pod's mirror pod as the node, with a
// caller's node UID getter, and returns the MirrorPods that did it and the
// set of static pods it syncs to.
func syncMirrorPod(t *testing.T, nodeClient kubernetes.Interface, node *v1.Node, static *v1.Pod) (*MirrorPods, *staticSet) {
	t.Helper()
	set := &staticSet{}
	mp, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(nodeClient.CoreV1()), Nodes: nodeClient.CoreV1().Nodes(), NodeName: node.Name,
		NodeUID: func(context.Context) (types.UID, error) { return node.UID, nil }, StaticPods: set.get})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.sync(context.Background(), mp, static); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	return mp, set
}

// The real API server defaults a mirror pod's containers and volumes no
// further than SetPodDefaults did for the static pod: requests from limits,
// probes, lifecycle handlers, ports, env and volumes come out the same, and
// the QoS class the API server computes is the static pod's.
func TestIntegrationMirrorPodNeedsNoFurtherDefaults(t *testing.T) {
	const nodeName = "podsource-n3"
	nodeClient, node := integrationNode(t, nodeName)
	ctx := context.Background()
	static, err := DecodeManifest([]byte(limitsOnlyYAML), Origin{Source: FileSource, Location: "/m/etcd.yaml", NodeName: nodeName})
	if err != nil {
		t.Fatal(err)
	}
	mp, set := syncMirrorPod(t, nodeClient, node, static)
	defer func() {
		if err := set.sync(ctx, mp); err != nil {
			t.Errorf("SyncOnce cleaning up: %v", err)
		}
	}()
	// Read as admin: the Node authorizer learns of the new pod asynchronously.
	mirror, err := cp.AdminClient().CoreV1().Pods(static.Namespace).Get(ctx, static.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mirror.Status.QOSClass, qosClass(static); got != want || want != v1.PodQOSGuaranteed {
		t.Errorf("API server's QoS class %s, static pod's %s, want both Guaranteed", got, want)
	}
	for what, pair := range map[string][2]any{
		"containers":       {static.Spec.Containers, mirror.Spec.Containers},
		"init containers":  {static.Spec.InitContainers, mirror.Spec.InitContainers},
		"volumes":          {static.Spec.Volumes, mirror.Spec.Volumes},
		"security context": {static.Spec.SecurityContext, mirror.Spec.SecurityContext},
		"restart, dns, scheduler, grace, service links": {
			[]any{static.Spec.RestartPolicy, static.Spec.DNSPolicy, static.Spec.SchedulerName, *static.Spec.TerminationGracePeriodSeconds, *static.Spec.EnableServiceLinks},
			[]any{mirror.Spec.RestartPolicy, mirror.Spec.DNSPolicy, mirror.Spec.SchedulerName, *mirror.Spec.TerminationGracePeriodSeconds, *mirror.Spec.EnableServiceLinks},
		},
	} {
		if !apiequality.Semantic.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s differ between the static pod and its mirror pod as stored:\n static %+v\n mirror %+v", what, pair[0], pair[1])
		}
	}
}
