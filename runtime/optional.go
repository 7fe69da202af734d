package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodSandboxMetricsLister is implemented by runtimes that can be asked for pod
// sandbox metrics (CRI ListPodSandboxMetrics). It is not part of Runtime:
// containerd 1.6, for one, answers Unimplemented (see IsUnimplemented).
type PodSandboxMetricsLister interface {
	ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error)
}

// ContainerEventWatcher is implemented by runtimes that stream container
// events (CRI GetContainerEvents). It is not part of Runtime: containerd 1.6,
// for one, answers Unimplemented (see IsUnimplemented).
type ContainerEventWatcher interface {
	// WatchContainerEvents calls fn for each event until ctx ends, when it
	// returns ctx's error, or the stream fails.
	WatchContainerEvents(ctx context.Context, fn func(*runtimeapi.ContainerEventResponse)) error
}
