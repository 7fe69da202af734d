package cri

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodData supplies what a pod takes from the API server and the node
// beyond its spec: volumes, environment variables and image pull
// credentials. podsync/volume's Manager implements it, kubelet-exact; a
// backend with its own storage can plug in another. The CRI syncer calls
// SetUpPod at the start of every SyncPod (a failure waits the pod and is
// retried), the env and auth methods while it builds containers and pulls
// images, and TearDownPod in SyncTerminatedPod, once the pod's containers
// are gone. dir is the pod's directory, <PodRoot>/<uid>.
type PodData interface {
	// SetUpPod makes dir and sets up or refreshes the pod's volumes.
	SetUpPod(ctx context.Context, pod *corev1.Pod, dir string) error
	// TearDownPod releases what SetUpPod took and removes dir.
	TearDownPod(ctx context.Context, pod *corev1.Pod, dir string) error
	// VolumePath is the host directory of a volume PodData serves; ok
	// false for a volume podsync serves itself (emptyDir on disk, hostPath).
	VolumePath(pod *corev1.Pod, dir string, v *corev1.Volume) (path string, ok bool)
	// EnvFrom returns the container's envFrom variables and the service
	// variables (the kubelet's enableServiceLinks), in that order of
	// precedence below the container's own env.
	EnvFrom(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (envFrom, services []corev1.EnvVar, err error)
	// EnvValue resolves configMapKeyRef, secretKeyRef and resourceFieldRef;
	// ok false leaves the variable out (an optional source that is missing).
	EnvValue(ctx context.Context, pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource) (value string, ok bool, err error)
	// PullAuth returns the credentials for pulling image, in the order to
	// try them, or nil.
	PullAuth(pod *corev1.Pod, image string) []*runtimeapi.AuthConfig
}

// setUpPod prepares the pod's directory and volumes through PodData.
func (b *builder) setUpPod(ctx context.Context, pod *corev1.Pod) error {
	if b.data == nil {
		return nil
	}
	return b.data.SetUpPod(ctx, pod, b.podDir(pod))
}

// removePodDir removes a terminated pod's directory: its subPath mounts
// first, then the rest, through PodData when there is one (it unmounts what
// it mounted first).
func (b *builder) removePodDir(ctx context.Context, pod *corev1.Pod) error {
	if err := cleanSubPaths(b.podDir(pod)); err != nil {
		return err
	}
	if b.data == nil {
		return os.RemoveAll(b.podDir(pod))
	}
	return b.data.TearDownPod(ctx, pod, b.podDir(pod))
}

// pullAuth is PodData's credentials for image, nil without PodData.
func (b *builder) pullAuth(pod *corev1.Pod, image string) []*runtimeapi.AuthConfig {
	if b.data == nil {
		return nil
	}
	return b.data.PullAuth(pod, image)
}
