package remote

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Exec asks the runtime to prepare req.Cmd in container req.ContainerId
// with the streams req asks for, and returns the URL of its streaming
// server where the command is run once a client connects.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	resp := new(runtimeapi.ExecResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_Exec_FullMethodName, "Exec", req, resp); err != nil {
		return "", err
	}
	return c.streamURL("Exec", resp.Url)
}

// Attach asks the runtime to prepare an attachment to container
// req.ContainerId and returns the URL of its streaming server.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	resp := new(runtimeapi.AttachResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_Attach_FullMethodName, "Attach", req, resp); err != nil {
		return "", err
	}
	return c.streamURL("Attach", resp.Url)
}

// PortForward asks the runtime to prepare forwarding into sandbox
// req.PodSandboxId's network namespace and returns the URL of its
// streaming server.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	resp := new(runtimeapi.PortForwardResponse)
	if err := c.invoke(ctx, c.timeout, runtimeapi.RuntimeService_PortForward_FullMethodName, "PortForward", req, resp); err != nil {
		return "", err
	}
	return c.streamURL("PortForward", resp.Url)
}

// streamURL refuses an empty URL, which a proxy could not use.
func (c *Client) streamURL(method, url string) (string, error) {
	if url == "" {
		return "", &runtime.Error{Endpoint: c.endpoint, Method: method,
			Err: status.Error(codes.Internal, "runtime returned no streaming URL")}
	}
	return url, nil
}
