package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	cri "k8s.io/cri-client/pkg"
	"k8s.io/cri-client/pkg/fake"

	"github.com/nodekit/nodekit/runtime/remote"
)

const numContainers = 100

// server starts cri-client's fake CRI server on a unix socket with
// numContainers containers and returns its endpoint and a container ID.
func server(b *testing.B) (endpoint, containerID string) {
	b.Helper()
	dir, err := os.MkdirTemp("", "crib")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	endpoint = "unix://" + filepath.Join(dir, "cri.sock")
	f := fake.NewFakeRemoteRuntime()
	var cs []*apitest.FakeContainer
	for i := range numContainers {
		id := fmt.Sprintf("%064x", i+1)
		cs = append(cs, &apitest.FakeContainer{
			ContainerStatus: runtimeapi.ContainerStatus{
				Id:        id,
				Metadata:  &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("container-%d", i), Attempt: 0},
				State:     runtimeapi.ContainerState_CONTAINER_RUNNING,
				CreatedAt: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC).UnixNano(),
				StartedAt: time.Date(2026, 1, 1, 0, 0, i+1, 0, time.UTC).UnixNano(),
				Image:     &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"},
				ImageRef:  "sha256:" + fmt.Sprintf("%064x", 7),
				Labels: map[string]string{
					"io.kubernetes.pod.name":       fmt.Sprintf("pod-%d", i/2),
					"io.kubernetes.pod.namespace":  "default",
					"io.kubernetes.pod.uid":        fmt.Sprintf("uid-%d", i/2),
					"io.kubernetes.container.name": fmt.Sprintf("container-%d", i),
				},
				Annotations: map[string]string{
					"io.kubernetes.container.hash":         "3bb4e8b1",
					"io.kubernetes.container.restartCount": "0",
				},
				LogPath: fmt.Sprintf("/var/log/pods/default_pod-%d/container-%d/0.log", i/2, i),
			},
			SandboxID: fmt.Sprintf("%064x", 1000+i/2),
		})
	}
	f.RuntimeService.SetFakeContainers(cs)
	if err := f.Start(endpoint); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Stop)
	// The fake records every call; forget them between benchmarks so both
	// clients pay the same.
	b.Cleanup(func() {
		f.RuntimeService.Lock()
		f.RuntimeService.Called = nil
		f.RuntimeService.Unlock()
	})
	return endpoint, cs[42].Id
}

// ops is what each benchmark runs, the same for both clients.
type ops struct {
	list   func(context.Context) (int, error)
	status func(context.Context, string) error
	exec   func(context.Context, string) error
}

func nodekitOps(b *testing.B, endpoint string) ops {
	c, err := remote.New(remote.Options{Endpoint: endpoint})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return ops{
		list: func(ctx context.Context) (int, error) {
			cs, err := c.ListContainers(ctx, nil)
			return len(cs), err
		},
		status: func(ctx context.Context, id string) error {
			_, err := c.ContainerStatus(ctx, id, false)
			return err
		},
		exec: func(ctx context.Context, id string) error {
			_, err := c.ExecSync(ctx, id, []string{"cat", "/tmp/healthy"}, time.Second)
			return err
		},
	}
}

func criClientOps(b *testing.B, endpoint string) ops {
	// No tracer provider: the peer at its leanest (no otelgrpc handler).
	var svc internalapi.RuntimeService
	svc, err := cri.NewRemoteRuntimeService(context.Background(), endpoint, 2*time.Minute, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close(context.Background()) })
	return ops{
		list: func(ctx context.Context) (int, error) {
			cs, err := svc.ListContainers(ctx, nil)
			return len(cs), err
		},
		status: func(ctx context.Context, id string) error {
			_, err := svc.ContainerStatus(ctx, id, false)
			return err
		},
		exec: func(ctx context.Context, id string) error {
			_, _, err := svc.ExecSync(ctx, id, []string{"cat", "/tmp/healthy"}, time.Second)
			return err
		},
	}
}

var clients = []struct {
	name string
	ops  func(*testing.B, string) ops
}{
	{"nodekit", nodekitOps},
	{"cri-client", criClientOps},
}

func BenchmarkListContainers100(b *testing.B) {
	for _, cl := range clients {
		b.Run("client="+cl.name, func(b *testing.B) {
			endpoint, _ := server(b)
			o := cl.ops(b, endpoint)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				n, err := o.list(ctx)
				if err != nil || n != numContainers {
					b.Fatalf("ListContainers: %d, %v", n, err)
				}
			}
		})
	}
}

func BenchmarkContainerStatus(b *testing.B) {
	for _, cl := range clients {
		b.Run("client="+cl.name, func(b *testing.B) {
			endpoint, id := server(b)
			o := cl.ops(b, endpoint)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := o.status(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkExecSync(b *testing.B) {
	for _, cl := range clients {
		b.Run("client="+cl.name, func(b *testing.B) {
			endpoint, id := server(b)
			o := cl.ops(b, endpoint)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := o.exec(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
