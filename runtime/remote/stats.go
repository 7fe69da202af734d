package remote

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerStats returns the usage of one container. A missing container is
// an error for which runtime.runtime.IsNotFound is true.
func (c *Client) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	resp := new(runtimeapi.ContainerStatsResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ContainerStats_FullMethodName, "ContainerStats",
		&runtimeapi.ContainerStatsRequest{ContainerId: containerID}, resp); err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListContainerStats returns the usage of the containers that match filter
// (nil: all).
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	resp := new(runtimeapi.ListContainerStatsResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ListContainerStats_FullMethodName, "ListContainerStats",
		&runtimeapi.ListContainerStatsRequest{Filter: filter}, resp); err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// PodSandboxStats returns the usage of one sandbox. containerd 1.6 answers
// Unimplemented (runtime.IsUnimplemented).
func (c *Client) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	resp := new(runtimeapi.PodSandboxStatsResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_PodSandboxStats_FullMethodName, "PodSandboxStats",
		&runtimeapi.PodSandboxStatsRequest{PodSandboxId: podSandboxID}, resp); err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListPodSandboxStats returns the usage of the sandboxes that match filter
// (nil: all). containerd 1.6 answers Unimplemented (runtime.IsUnimplemented).
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	resp := new(runtimeapi.ListPodSandboxStatsResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_ListPodSandboxStats_FullMethodName, "ListPodSandboxStats",
		&runtimeapi.ListPodSandboxStatsRequest{Filter: filter}, resp); err != nil {
		return nil, err
	}
	return resp.Stats, nil
}
