package volume

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/runtime/remote"
)

// A busybox pod on the real containerd whose data comes from the test API
// server as system:node:<name>: it reads its Secret, ConfigMap, downward-API
// labels, token and env, a subPath, a memory emptyDir that is a tmpfs, and
// /etc/hosts; the pod's fsGroup owns its Secret's files, and a file a
// non-root container makes in an emptyDir; its data volumes are read-only; a ConfigMap update reaches
// the mounted file within a few seconds; after deletion containerd, the
// pod directory and every mount below the pod root are empty.
func TestE2EPodData(t *testing.T) {
	c := containerdtest.Need(t, ctrd)
	n := newAPINode(t, "volume-e2e")
	apiObjects(t, n.admin, "default", "e2e")
	ctx := context.Background()
	snap := leakcheck.Take()

	out := t.TempDir()
	podRoot := t.TempDir()
	defer func() { _ = unmountAll(podRoot) }()
	dirType := corev1.HostPathDirectory
	size := resource.MustParse("8Mi")
	pod := apiPod("data", n.name, "e2e")
	grace := int64(2)
	pod.Spec.HostNetwork, pod.Spec.DNSPolicy, pod.Spec.TerminationGracePeriodSeconds = true, corev1.DNSDefault, &grace
	pod.Spec.EnableServiceLinks = ptr(false)
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
		corev1.Volume{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out, Type: &dirType}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	fsGroup, user := int64(2000), int64(1000)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: &fsGroup}
	// A second container, not root, writes to an emptyDir: the file gets
	// the pod's fsGroup.
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "user", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &user},
		VolumeMounts:    []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
		Command:         []string{"sh", "-c", `touch /scratch/f; trap 'exit 0' TERM; while true; do sleep 1; done`}})
	app := &pod.Spec.Containers[0]
	app.Image, app.ImagePullPolicy = c.BusyboxImage, corev1.PullNever
	app.VolumeMounts = append(app.VolumeMounts,
		corev1.VolumeMount{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
		corev1.VolumeMount{Name: "info", MountPath: "/info"},
		corev1.VolumeMount{Name: "mem", MountPath: "/mem"},
		corev1.VolumeMount{Name: "config", MountPath: "/sub/greeting", SubPath: "greeting"},
		corev1.VolumeMount{Name: "out", MountPath: "/out"})
	app.Command = []string{"sh", "-c", `
cat /s/user > /out/user
stat -L -c %g /s/user > /out/sgid
cat /c/greeting > /out/greeting
cat /info/labels > /out/labels
cat /var/run/secrets/kubernetes.io/serviceaccount/token > /out/token
cat /sub/greeting > /out/sub
grep ' /mem ' /proc/mounts > /out/mem
cat /etc/hosts > /out/hosts
if touch /s/x 2>/dev/null; then echo rw > /out/ro; else echo ro > /out/ro; fi
echo "$GREETING" > /out/env
trap 'exit 0' TERM
while true; do cat /c/greeting > /out/live.tmp && mv /out/live.tmp /out/live; sleep 0.1; done`}
	created, err := n.admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	defer func() {
		_ = n.admin.CoreV1().Pods("default").Delete(ctx, "data", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()

	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var eng *podsync.Engine
	m, err := New(withAPI(Options{OnChange: func(uid types.UID) {
		if eng != nil {
			eng.Trigger(uid)
		}
	}}, n.node.CoreV1()))
	if err != nil {
		t.Fatal(err)
	}
	syncer, err := cri.New(cri.Options{Runtime: rt, PodLogRoot: c.PodLogRoot, PodRoot: podRoot, CgroupRoot: c.CgroupRoot,
		ResolvConf: "-", NodeName: n.name, HostIPs: []string{"127.0.0.1"}, PodData: m})
	if err != nil {
		t.Fatal(err)
	}
	eng, err = podsync.New(podsync.Options{Syncer: syncer, HostIPs: []string{"127.0.0.1"}, RelistPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- m.Run(rctx) }()
	go func() { done <- eng.Run(rctx) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		_ = rt.Close()
		n.closeIdle()
		snap.Verify(t)
	}()

	eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{created}})
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return string(b)
	}
	testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "the container wrote what it read", func() bool { return read("env") != "" })
	for file, want := range map[string]string{"user": "admin", "greeting": "hello", "labels": `app="data"`, "sub": "hello", "env": "hello\n", "ro": "ro\n", "sgid": "2000\n"} {
		if got := read(file); got != want {
			t.Errorf("/out/%s = %q, want %q", file, got, want)
		}
	}
	if tok := read("token"); strings.Count(tok, ".") != 2 {
		t.Errorf("token %q is not a JWT", tok)
	}
	if mem := read("mem"); !strings.HasPrefix(mem, "tmpfs /mem tmpfs") || !strings.Contains(mem, "size=8192k") {
		t.Errorf("/mem: %q", mem)
	}
	if hosts := read("hosts"); !strings.HasPrefix(hosts, "# Kubernetes-managed hosts file (host network).\n") {
		t.Errorf("/etc/hosts: %q", hosts)
	}

	scratch := filepath.Join(podRoot, string(created.UID), "volumes", "kubernetes.io~empty-dir", "scratch", "f")
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "uid 1000 wrote to the emptyDir", func() bool {
		_, err := os.Stat(scratch)
		return err == nil
	})
	if info, err := os.Stat(scratch); err != nil || info.Sys().(*syscall.Stat_t).Gid != uint32(fsGroup) {
		t.Errorf("file made by uid 1000 in the emptyDir: %v, want group %d", err, fsGroup)
	}

	// A ConfigMap update reaches the mounted file through the watch.
	cm, err := n.admin.CoreV1().ConfigMaps("default").Get(ctx, "e2e-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "bonjour"
	start := time.Now()
	if _, err := n.admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, 20*time.Millisecond, "the update in the container", func() bool { return read("live") == "bonjour" })
	t.Logf("ConfigMap update seen by the container after %v", time.Since(start).Round(time.Millisecond))

	// Deletion: containers, sandbox, pod directory and mounts go.
	del := created.DeepCopy()
	now := metav1.Now()
	one := int64(1)
	del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &now, &one
	eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: []*corev1.Pod{del}})
	eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{del}})
	podDir := filepath.Join(podRoot, string(created.UID))
	testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "containerd empty and the pod directory gone", func() bool {
		sbs, err1 := rt.ListPodSandbox(ctx, nil)
		cs, err2 := rt.ListContainers(ctx, nil)
		_, err3 := os.Stat(podDir)
		return err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0 && errors.Is(err3, fs.ErrNotExist)
	})
	if mps, err := mountsUnder(podRoot); err != nil || len(mps) != 0 {
		t.Errorf("mounts left below the pod root: %v %v", mps, err)
	}
	if ents, _ := os.ReadDir(podRoot); len(ents) != 0 {
		t.Errorf("left in the pod root: %v", ents)
	}
	if m.Watches() != 0 {
		t.Errorf("%d watches after the pod went", m.Watches())
	}
}
