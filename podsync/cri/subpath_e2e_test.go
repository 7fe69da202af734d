package cri

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
)

// On the real containerd, one container writes through a subPathExpr
// mount of an emptyDir (out/$(POD_NAME)) and another reads the file at the
// volume's root; once the pod is deleted, volume-subpaths and the pod
// directory are gone and no mount is left below the pod root.
func TestE2ESubPathMount(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2ESubPathMount) }

func testE2ESubPathMount(t *testing.T, c *containerdtest.Containerd) {
	t.Cleanup(leakcheck.Check(t)) // runs after e.stop
	podRoot := t.TempDir()
	e := startE2E(t, c, podRoot)
	t.Cleanup(e.stop)
	pod := e2ePod(c, "subpath", corev1.RestartPolicyAlways, "sh", "-c", "echo hello > /out/msg && "+sleeper)
	pod.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	w := &pod.Spec.Containers[0]
	w.Env = []corev1.EnvVar{{Name: "POD_NAME", Value: pod.Name}}
	w.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/out", SubPathExpr: "out/$(POD_NAME)"}}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "reader", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
		Command:      []string{"sh", "-c", "until grep -q hello /vol/out/subpath/msg; do sleep 0.1; done; touch /vol/reader-saw-it && " + sleeper},
		VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/vol"}}})
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })

	podDir := filepath.Join(podRoot, string(pod.UID))
	volume := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "shared")
	testenv.Eventually(t, time.Minute, 50*time.Millisecond, "the reader saw the writer's file at the volume root", func() bool {
		_, err := os.Stat(filepath.Join(volume, "reader-saw-it"))
		return err == nil
	})
	if got, err := os.ReadFile(filepath.Join(volume, "out", "subpath", "msg")); err != nil || string(got) != "hello\n" {
		t.Errorf("file written through the subPath: %q, %v", got, err)
	}
	if n := len(mountsBelow(t, filepath.Join(podDir, SubPathDir))); n != 1 {
		t.Errorf("%d subPath mounts, want 1", n)
	}

	e.remove(pod)
	testenv.Eventually(t, time.Minute, 50*time.Millisecond, "the pod directory removed", func() bool {
		_, err := os.Stat(podDir)
		return errors.Is(err, os.ErrNotExist)
	})
	if left := mountsBelow(t, podRoot); len(left) > 0 {
		t.Errorf("mounts left below the pod root: %v", left)
	}
}
