package podsource_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/podsource"
)

// A node agent merges its static pod directory with the pods the API server
// binds to the node, and keeps a mirror pod for each static pod. The API
// server here is client-go's fake clientset.
func Example() {
	dir, err := os.MkdirTemp("", "manifests")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	web := `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx:1.27
`
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(web), 0o644); err != nil {
		panic(err)
	}
	client := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-1-uid"}},
		&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", UID: "db-uid"},
			Spec:       v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "db", Image: "postgres:17"}}},
		},
	)

	file, err := podsource.NewFile(podsource.FileOptions{Path: dir, NodeName: "node-1"})
	if err != nil {
		panic(err)
	}
	api, err := podsource.NewAPI(podsource.APIOptions{Pods: client.CoreV1().Pods(metav1.NamespaceAll), NodeName: "node-1"})
	if err != nil {
		panic(err)
	}
	merger, err := podsource.NewMerger(podsource.MergerOptions{Sources: []podsource.PodSource{file, api}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- merger.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// A pod sync loop would read merger.Updates(); here, wait until every
	// source has sent its first set and look at the merged pods.
	<-merger.SeenAllSourcesC()
	for _, p := range merger.Pods() {
		fmt.Printf("%s: %s/%s\n", p.Annotations[podsource.ConfigSourceAnnotation], p.Namespace, p.Name)
	}

	mirrors, err := podsource.NewMirrorPods(podsource.MirrorPodsOptions{
		Pods:     func(ns string) podsource.MirrorPodClient { return client.CoreV1().Pods(ns) },
		Nodes:    client.CoreV1().Nodes(),
		NodeName: "node-1", StaticPods: merger.StaticPods})
	if err != nil {
		panic(err)
	}
	if err := mirrors.SyncOnce(ctx); err != nil {
		panic(err)
	}
	mirror, err := client.CoreV1().Pods("default").Get(ctx, "web-node-1", metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	static := merger.StaticPods()[0]
	fmt.Println("mirror pod:", mirror.Name, "hash matches:",
		mirror.Annotations[podsource.ConfigMirrorAnnotation] == static.Annotations[podsource.ConfigHashAnnotation],
		"owner:", mirror.OwnerReferences[0].Kind, mirror.OwnerReferences[0].Name)
	// Output:
	// api: default/db
	// file: default/web-node-1
	// mirror pod: web-node-1 hash matches: true owner: Node node-1
}

// A manifest that cannot be used is an error naming the file and the field.
func ExampleDecodeManifest() {
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx:1.27
  - name: app
    image: busybox:1.36
`
	_, err := podsource.DecodeManifest([]byte(manifest), podsource.Origin{
		Source: podsource.FileSource, Location: "/etc/kubernetes/manifests/web.yaml", NodeName: "node-1",
	})
	fmt.Println(err)
	// Output:
	// podsource: file /etc/kubernetes/manifests/web.yaml: spec.containers[1].name: Duplicate value: "app"
}

// SetPodDefaults gives a pod the API's defaults: limits alone also set
// requests, so the pod is Guaranteed, as the API server would make it.
func ExampleSetPodDefaults() {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{
		Name:  "app",
		Image: "nginx:1.27",
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("500m"),
			v1.ResourceMemory: resource.MustParse("128Mi"),
		}},
	}}}}
	podsource.SetPodDefaults(pod)
	c := pod.Spec.Containers[0]
	fmt.Println("requests:", c.Resources.Requests.Cpu(), c.Resources.Requests.Memory())
	fmt.Println("pull policy:", c.ImagePullPolicy, "restart policy:", pod.Spec.RestartPolicy)
	// Output:
	// requests: 500m 128Mi
	// pull policy: IfNotPresent restart policy: Always
}

// A node name is taken as kubelet takes its hostname.
func ExampleCanonicalNodeName() {
	name, err := podsource.CanonicalNodeName(" Node-1 ")
	fmt.Printf("%q %v\n", name, err)
	_, err = podsource.CanonicalNodeName("node_1")
	fmt.Println(err != nil)
	// Output:
	// "node-1" <nil>
	// true
}

// Feeding a merger by hand, with Merge, shows the operations it derives.
func ExampleMerger_Merge() {
	pod := func(image string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default", UID: "uid-1"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: image}}},
		}
	}
	merger, err := podsource.NewMerger(podsource.MergerOptions{
		Sources: []podsource.PodSource{podsource.SourceFunc(podsource.APISource, nil)},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, set := range [][]*v1.Pod{{pod("app:1")}, {pod("app:1")}, {pod("app:2")}, {}} {
		if err := merger.Merge(ctx, podsource.Update{Op: podsource.OpSet, Source: podsource.APISource, Pods: set}); err != nil {
			panic(err)
		}
	}
	for len(merger.Updates()) > 0 {
		u := <-merger.Updates()
		fmt.Println(u.Op, len(u.Pods))
	}
	// Output:
	// ADD 1
	// UPDATE 1
	// REMOVE 1
}
