package cri

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime"
)

var (
	_ podsync.EventWatcher  = (*Syncer)(nil)
	_ podsync.HealthChecker = (*Syncer)(nil)
)

// WatchEvents streams the runtime's CRI container events as PodEvents when
// the runtime is a runtime.ContainerEventWatcher, with the pod UID from the
// io.kubernetes.pod.uid label of the event's sandbox status or container
// statuses. A runtime without events (not a ContainerEventWatcher, or
// answering Unimplemented) is ErrNoEvents.
func (c *Syncer) WatchEvents(ctx context.Context, fn func(podsync.PodEvent)) error {
	w, ok := c.rt.(runtime.ContainerEventWatcher)
	if !ok {
		return podsync.ErrNoEvents
	}
	err := w.WatchContainerEvents(ctx, func(ev *runtimeapi.ContainerEventResponse) { fn(podEvent(ev)) })
	if runtime.IsUnimplemented(err) {
		return fmt.Errorf("%w: %w", podsync.ErrNoEvents, err)
	}
	return err
}

func podEvent(ev *runtimeapi.ContainerEventResponse) podsync.PodEvent {
	pe := podsync.PodEvent{ContainerID: ev.GetContainerId(), SandboxID: ev.GetPodSandboxStatus().GetId(),
		UID: types.UID(ev.GetPodSandboxStatus().GetLabels()[LabelPodUID])}
	for _, cs := range ev.GetContainersStatuses() {
		if pe.UID != "" {
			break
		}
		pe.UID = types.UID(cs.GetLabels()[LabelPodUID])
	}
	return pe
}

// CheckHealth asks the runtime's status when a relist would (so
// LatestRuntimeStatus stays fresh while events make relists rare); within
// Options.StatusPeriod of a good answer it returns nil without asking.
func (c *Syncer) CheckHealth(ctx context.Context) error {
	if err := c.refreshStatus(ctx); err != nil {
		return fmt.Errorf("podsync: runtime status: %w", c.opError("status", err))
	}
	return nil
}
