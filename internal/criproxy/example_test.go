package criproxy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/internal/criproxy"
	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A proxy in front of a runtime (here the fake served over gRPC) fails the
// second Version call (the client's own check at connection is the first)
// and counts all three.
func Example() {
	dir, _ := os.MkdirTemp("", "criproxy")
	defer os.RemoveAll(dir)
	backend := filepath.Join(dir, "backend.sock")
	lis, err := net.Listen("unix", backend)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer()
	runtimetest.NewServer(runtimetest.New(runtimetest.Options{})).Register(srv)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	p, err := criproxy.Start(filepath.Join(dir, "proxy.sock"), backend)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Stop()
	const version = "/runtime.v1.RuntimeService/Version"
	p.SetFault(version, func(_ context.Context, n int) error {
		if n == 2 {
			return status.Error(codes.Unavailable, "injected")
		}
		return nil
	})

	rt, err := remote.New(remote.Options{Endpoint: p.Endpoint, ConnectionTimeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	ctx := context.Background()
	_, err = rt.Version(ctx)
	fmt.Println("first:", status.Code(err))
	v, err := rt.Version(ctx)
	fmt.Println("second:", err == nil && v.RuntimeName != "")
	fmt.Println("calls:", p.Calls(version))
	// Output:
	// first: Unavailable
	// second: true
	// calls: 3
}
