package podsync

import (
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// PodLogDir is the kubelet's log directory of a pod below root:
// <root>/<namespace>_<name>_<uid>.
func PodLogDir(root string, pod *corev1.Pod) string {
	return filepath.Join(root, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// ContainerLogPath is the path of a container's log relative to its pod's log
// directory: <container>/<restartCount>.log.
func ContainerLogPath(name string, restartCount int) string {
	return filepath.Join(name, strconv.Itoa(restartCount)+".log")
}
