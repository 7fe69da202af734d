package podsync

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodState is what runs for one pod, as a relist of the backend saw it: its
// sandboxes and containers, newest first. It is observed state only; the
// desired pod is the *corev1.Pod next to it. PodState values handed to a
// PodSyncer or kept by the engine are never modified.
type PodState struct {
	UID       types.UID
	Name      string
	Namespace string
	// Sandboxes, newest (highest attempt, then latest creation) first.
	Sandboxes []*SandboxState
	// Containers of every sandbox, newest (latest creation) first.
	Containers []*ContainerState
}

// SandboxState is one observed pod sandbox.
type SandboxState struct {
	ID        string
	State     runtimeapi.PodSandboxState
	Attempt   uint32
	CreatedAt time.Time
	// HostNetwork: the sandbox shares the node's network namespace.
	HostNetwork bool
	// IPs are the sandbox's pod IPs, primary first (empty on host network).
	IPs []string
}

// Ready reports whether the sandbox is SANDBOX_READY.
func (s *SandboxState) Ready() bool { return s.State == runtimeapi.PodSandboxState_SANDBOX_READY }

// ContainerState is one observed container.
type ContainerState struct {
	ID        string
	SandboxID string
	Name      string
	// Image is the image the container was created from, as the pod named it;
	// ImageRef is the runtime's reference to it (the status's imageID).
	Image    string
	ImageRef string
	State    runtimeapi.ContainerState
	// Hash is the io.kubernetes.container.hash annotation.
	Hash         string
	RestartCount int
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	// Reason and Message are the runtime's (Completed, Error, OOMKilled) and
	// the termination message.
	Reason  string
	Message string
	// User is the identity the container's process runs with, as the
	// runtime reports it (containerd 2 does; nil when it does not).
	User *corev1.ContainerUser
	// CutShort: the container exited without ever starting and was
	// created before the syncer that observed it started. It is the start
	// of an agent that went away mid-call, which the runtime aborted
	// (containerd 2 does). When the pod restarts it, the CRI syncer
	// replaces it at the same restart count, and the status shows it as
	// waiting to be created, not as a failed start.
	CutShort bool
}

// Running reports whether the container is CONTAINER_RUNNING.
func (c *ContainerState) Running() bool {
	return c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
}

// Exited reports whether the container is CONTAINER_EXITED.
func (c *ContainerState) Exited() bool { return c.State == runtimeapi.ContainerState_CONTAINER_EXITED }

// Latest returns the newest container named name, or nil.
func (s *PodState) Latest(name string) *ContainerState {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// previous returns the container named name that ran before the newest, or nil.
func (s *PodState) previous(name string) *ContainerState {
	seen := false
	for _, c := range s.Containers {
		if c.Name == name {
			if seen {
				return c
			}
			seen = true
		}
	}
	return nil
}

// NewestExited returns the newest exited container named name (Containers
// are newest first), or nil; s may be nil.
func (s *PodState) NewestExited(name string) *ContainerState {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name && c.Exited() {
			return c
		}
	}
	return nil
}

// NewestSandbox returns the newest sandbox (Sandboxes are newest first), or
// nil when there is none or s is nil.
func (s *PodState) NewestSandbox() *SandboxState {
	if s == nil || len(s.Sandboxes) == 0 {
		return nil
	}
	return s.Sandboxes[0]
}
