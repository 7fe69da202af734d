package runtimetest

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Server serves a runtime.Runtime (usually a fake Runtime) as the CRI v1
// RuntimeService and ImageService over gRPC, so that a CRI client can be
// tested against it. Methods outside runtime.Runtime answer Unimplemented.
// Errors keep their gRPC status; an error without one is codes.Unknown, and
// an ExecSync timeout (runtime.ErrExecTimeout) is codes.DeadlineExceeded.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	rt runtime.Runtime
}

// NewServer returns a Server for rt.
func NewServer(rt runtime.Runtime) *Server { return &Server{rt: rt} }

// Register registers the runtime and image services on g.
func (s *Server) Register(g *grpc.Server) {
	runtimeapi.RegisterRuntimeServiceServer(g, s)
	runtimeapi.RegisterImageServiceServer(g, s)
}

func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, runtime.ErrExecTimeout) && status.Code(err) != codes.DeadlineExceeded {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// Version serves the CRI call Version.
func (s *Server) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	r, err := s.rt.Version(ctx)
	return r, toStatus(err)
}

// Status serves the CRI call Status.
func (s *Server) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	r, err := s.rt.Status(ctx, req.Verbose)
	return r, toStatus(err)
}

// RunPodSandbox serves the CRI call RunPodSandbox.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := s.rt.RunPodSandbox(ctx, req.Config, req.RuntimeHandler)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox serves the CRI call StopPodSandbox.
func (s *Server) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := s.rt.StopPodSandbox(ctx, req.PodSandboxId); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox serves the CRI call RemovePodSandbox.
func (s *Server) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if err := s.rt.RemovePodSandbox(ctx, req.PodSandboxId); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus serves the CRI call PodSandboxStatus.
func (s *Server) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r, err := s.rt.PodSandboxStatus(ctx, req.PodSandboxId, req.Verbose)
	return r, toStatus(err)
}

// ListPodSandbox serves the CRI call ListPodSandbox.
func (s *Server) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := s.rt.ListPodSandbox(ctx, req.Filter)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// CreateContainer serves the CRI call CreateContainer.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	id, err := s.rt.CreateContainer(ctx, req.PodSandboxId, req.Config, req.SandboxConfig)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// StartContainer serves the CRI call StartContainer.
func (s *Server) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if err := s.rt.StartContainer(ctx, req.ContainerId); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer serves the CRI call StopContainer.
func (s *Server) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := s.rt.StopContainer(ctx, req.ContainerId, time.Duration(req.Timeout)*time.Second); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer serves the CRI call RemoveContainer.
func (s *Server) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := s.rt.RemoveContainer(ctx, req.ContainerId); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// ListContainers serves the CRI call ListContainers.
func (s *Server) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	cs, err := s.rt.ListContainers(ctx, req.Filter)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListContainersResponse{Containers: cs}, nil
}

// ContainerStatus serves the CRI call ContainerStatus.
func (s *Server) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r, err := s.rt.ContainerStatus(ctx, req.ContainerId, req.Verbose)
	return r, toStatus(err)
}

// ExecSync serves the CRI call ExecSync.
func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	r, err := s.rt.ExecSync(ctx, req.ContainerId, req.Cmd, time.Duration(req.Timeout)*time.Second)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode}, nil
}

// Exec serves the CRI call Exec.
func (s *Server) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	u, err := s.rt.Exec(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ExecResponse{Url: u}, nil
}

// Attach serves the CRI call Attach.
func (s *Server) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	u, err := s.rt.Attach(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.AttachResponse{Url: u}, nil
}

// PortForward serves the CRI call PortForward.
func (s *Server) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	u, err := s.rt.PortForward(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.PortForwardResponse{Url: u}, nil
}

// ListImages serves the CRI call ListImages.
func (s *Server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	imgs, err := s.rt.ListImages(ctx, req.Filter)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListImagesResponse{Images: imgs}, nil
}

// ImageStatus serves the CRI call ImageStatus.
func (s *Server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	r, err := s.rt.ImageStatus(ctx, req.Image, req.Verbose)
	return r, toStatus(err)
}

// PullImage serves the CRI call PullImage.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref, err := s.rt.PullImage(ctx, req.Image, req.Auth, req.SandboxConfig)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

// RemoveImage serves the CRI call RemoveImage.
func (s *Server) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if err := s.rt.RemoveImage(ctx, req.Image); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo serves the CRI call ImageFsInfo.
func (s *Server) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	r, err := s.rt.ImageFsInfo(ctx)
	return r, toStatus(err)
}

// UpdateRuntimeConfig serves the CRI call UpdateRuntimeConfig.
func (s *Server) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	if err := s.rt.UpdateRuntimeConfig(ctx, req.RuntimeConfig); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// UpdateContainerResources serves the CRI call UpdateContainerResources.
func (s *Server) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	res := &runtimeapi.ContainerResources{Linux: req.Linux, Windows: req.Windows}
	if err := s.rt.UpdateContainerResources(ctx, req.ContainerId, res); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog serves the CRI call ReopenContainerLog.
func (s *Server) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	if err := s.rt.ReopenContainerLog(ctx, req.ContainerId); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
