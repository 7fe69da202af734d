package volume_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/volume"
)

// The Manager is the CRI syncer's PodData.
var _ cri.PodData = (*volume.Manager)(nil)

// A ConfigMap volume and an env var from the same ConfigMap, set up for a
// pod as the CRI syncer does before its sandbox, then torn down.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewSimpleClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "default"},
		Data: map[string]string{"greeting": "hello"}})
	core := client.CoreV1()
	m, err := volume.New(volume.Options{
		Secrets:         func(ns string) volume.SecretClient { return core.Secrets(ns) },
		ConfigMaps:      func(ns string) volume.ConfigMapClient { return core.ConfigMaps(ns) },
		Services:        func(ns string) volume.ServiceClient { return core.Services(ns) },
		ServiceAccounts: func(ns string) volume.ServiceAccountClient { return core.ServiceAccounts(ns) },
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }() // the watches run while Run runs
	defer func() { cancel(); <-done }()

	ref := corev1.LocalObjectReference{Name: "web-config"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref}}}},
			Containers: []corev1.Container{{Name: "app", Image: "busybox",
				Env:          []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref, Key: "greeting"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/config"}}}}}}
	root, _ := os.MkdirTemp("", "volume-example")
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "pods", string(pod.UID))

	if err := m.SetUpPod(ctx, pod, dir); err != nil {
		panic(err)
	}
	host, _ := m.VolumePath(pod, dir, &pod.Spec.Volumes[0])
	b, _ := os.ReadFile(filepath.Join(host, "greeting"))
	link, _ := os.Readlink(filepath.Join(host, "greeting"))
	fmt.Printf("%s/greeting -> %s: %s\n", filepath.Base(host), link, b)
	v, _, _ := m.EnvValue(ctx, pod, &pod.Spec.Containers[0], pod.Spec.Containers[0].Env[0].ValueFrom)
	fmt.Println("GREETING =", v, "; watches:", m.Watches())

	if err := m.TearDownPod(ctx, pod, dir); err != nil {
		panic(err)
	}
	_, err = os.Stat(dir)
	fmt.Println("pod directory removed:", os.IsNotExist(err), "; watches:", m.Watches())
	// Output:
	// config/greeting -> ..data/greeting: hello
	// GREETING = hello ; watches: 1
	// pod directory removed: true ; watches: 0
}
