package containerdtest

import (
	"path"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CgroupParent returns a cgroupfs parent path for a pod, below the
// instance's cgroup root, so Stop removes it. name is one path element
// (slashes are replaced).
func (c *Containerd) CgroupParent(name string) string {
	return path.Join(c.CgroupRoot, strings.ReplaceAll(name, "/", "_"))
}

// PodLogDirectory returns the log directory SandboxConfig uses for a pod,
// laid out as the kubelet does (<namespace>_<name>_<uid>).
func (c *Containerd) PodLogDirectory(name, namespace, uid string) string {
	return filepath.Join(c.PodLogRoot, namespace+"_"+name+"_"+uid)
}

// SandboxConfig returns a pod sandbox config as the kubelet would send it for
// a host-network pod: empty hostname, the io.kubernetes.pod.* labels, a log
// directory under PodLogRoot and a cgroup parent under CgroupRoot.
func (c *Containerd) SandboxConfig(name, namespace, uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		Hostname:     "",
		LogDirectory: c.PodLogDirectory(name, namespace, uid),
		Labels: map[string]string{
			"io.kubernetes.pod.name":      name,
			"io.kubernetes.pod.namespace": namespace,
			"io.kubernetes.pod.uid":       uid,
		},
		Annotations: map[string]string{},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: c.CgroupParent("pod" + uid),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_NODE,
					Pid:     runtimeapi.NamespaceMode_CONTAINER,
					Ipc:     runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
}

// BusyboxContainer returns a container config that runs command in the
// busybox image, logging to <name>/0.log in the pod's log directory, with
// the io.kubernetes.container.name label.
func (c *Containerd) BusyboxContainer(name string, command ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: c.BusyboxImage},
		Command:  command,
		LogPath:  filepath.Join(name, "0.log"),
		Labels:   map[string]string{"io.kubernetes.container.name": name},
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
}
