package remote_test

import (
	"context"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
	"github.com/nodekit/nodekit/runtime/runtimetest/contract"
)

// ctrd is the real containerd the end-to-end tests use (the host's 1.x) and
// ctrd2 a containerd 2 from the test binaries; nil in -short mode or when
// they are not available (the tests then skip).
var ctrd, ctrd2 *containerdtest.Containerd

func TestMain(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }

// TestE2EContract runs the contract suite on the CRI client against a real
// containerd 1.x (which answers container events and sandbox metrics with
// Unimplemented: those cases skip). It runs in parallel with the suite on
// containerd 2 (each on its own containerd), after the package's other
// tests.
func TestE2EContract(t *testing.T) {
	c := containerdtest.Need(t, ctrd)
	t.Parallel()
	runContract(t, c)
}

// TestE2EContractContainerd2 runs the contract suite against containerd 2,
// where the container events, sandbox metrics and sandbox stats cases run
// too: a skip of any of them fails.
func TestE2EContractContainerd2(t *testing.T) {
	c := containerdtest.Need2(t, ctrd2)
	t.Parallel()
	v, err := c.RuntimeClient().Version(context.Background(), &runtimeapi.VersionRequest{})
	if err != nil || !strings.HasPrefix(strings.TrimPrefix(v.GetRuntimeVersion(), "v"), "2.") {
		t.Fatalf("CRI Version of the containerd 2 instance: %v, %v", v, err)
	}
	skipped := runContract(t, c)
	for _, name := range []string{"ContainerEvents", "PodSandboxMetrics", "PodSandboxStats"} {
		t.Run("ran/"+name, func(t *testing.T) {
			if skipped[name] {
				t.Errorf("the %s case skipped on containerd %s, which implements it", name, v.GetRuntimeVersion())
			}
		})
	}
}

// runContract runs the contract suite on c and returns the names of the
// cases that skipped.
func runContract(t *testing.T, c *containerdtest.Containerd) map[string]bool {
	client, err := remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	var mu sync.Mutex
	skipped := map[string]bool{}
	contract.Run(t, func(t *testing.T) contract.Target {
		t.Cleanup(func() {
			if t.Skipped() {
				mu.Lock()
				skipped[path.Base(t.Name())] = true
				mu.Unlock()
			}
		})
		return contract.Target{
			Runtime:      client,
			PauseImage:   c.PauseImage,
			BusyboxImage: c.BusyboxImage,
			SandboxConfig: func(cfg *runtimeapi.PodSandboxConfig) {
				md := cfg.Metadata
				cfg.LogDirectory = c.PodLogDirectory(md.Name, md.Namespace, md.Uid)
				cfg.Linux.CgroupParent = c.CgroupParent("pod" + md.Uid)
			},
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return skipped
}

// TestE2EClientErrors checks on containerd what the unit tests check on the
// fake server: version, errors naming the endpoint and call, NotFound.
func TestE2EClientErrors(t *testing.T) {
	c := containerdtest.Need(t, ctrd)
	client, err := remote.New(remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer client.Close()
	ctx := context.Background()
	v, err := client.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("runtime %s %s, CRI %s", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
	_, err = client.ContainerStatus(ctx, "c0ffee0000000000000000000000000000000000000000000000000000c0ffee", false)
	if !runtime.IsNotFound(err) || !strings.HasPrefix(err.Error(), "cri "+c.Endpoint+": ContainerStatus: NotFound: ") {
		t.Errorf("ContainerStatus(missing): %v", err)
	}
}

// TestE2EClientMatchesGenerated compares what the client returns from
// containerd's ListContainers and ContainerStatus (verbose, with its info
// map) with what the generated CRI client returns, on containerd 1.x and
// 2; and that a list decodes again only what changed.
func TestE2EClientMatchesGenerated(t *testing.T) {
	t.Run("containerd1", func(t *testing.T) { clientMatchesGenerated(t, containerdtest.Need(t, ctrd)) })
	t.Run("containerd2", func(t *testing.T) { clientMatchesGenerated(t, containerdtest.Need2(t, ctrd2)) })
}

func clientMatchesGenerated(t *testing.T, c *containerdtest.Containerd) {
	client, err := remote.New(remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sbCfg := c.SandboxConfig("decoder", "e2e", "decoder-uid")
	sb, err := client.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.RemovePodSandbox(context.Background(), sb) }()
	cfg := c.BusyboxContainer("main", "sh", "-c", "sleep 3600")
	cfg.Annotations = map[string]string{"io.kubernetes.container.hash": "1234", "é": "世"}
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/host-tmp", HostPath: os.TempDir(), Readonly: true}}
	id, err := client.CreateContainer(ctx, sb, cfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}

	std := c.RuntimeClient()
	for _, verbose := range []bool{false, true} {
		got, err := client.ContainerStatus(ctx, id, verbose)
		if err != nil {
			t.Fatal(err)
		}
		want, err := std.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("ContainerStatus(verbose=%v) differs:\n got %v\nwant %v", verbose, got, want)
		}
	}
	got, err := client.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := std.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&runtimeapi.ListContainersResponse{Containers: got}, want) {
		t.Errorf("ListContainers differs:\n got %v\nwant %v", got, want.Containers)
	}
	res, err := client.ExecSync(ctx, id, []string{"sh", "-c", "printf 'a\\000b'; printf x >&2"}, 10*time.Second)
	if err != nil || string(res.Stdout) != "a\x00b" || string(res.Stderr) != "x" {
		t.Errorf("ExecSync = %+v, %v", res, err)
	}
	// Listed again unchanged, the container and the sandbox are the
	// messages of the first lists (both containerds write their labels in
	// map order, rarely the same twice); a stopped container is decoded
	// again.
	sbs, err := client.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := client.ListContainers(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != 1 || again[0] != got[0] {
			t.Errorf("ListContainers again: %p, want the first list's message %p", again, got[0])
		}
		sbsAgain, err := client.ListPodSandbox(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(sbsAgain) != 1 || sbsAgain[0] != sbs[0] {
			t.Errorf("ListPodSandbox again: %p, want the first list's message %p", sbsAgain, sbs[0])
		}
	}
	if err := client.StopContainer(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	stopped, err := client.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || stopped[0] == got[0] || stopped[0].State != runtimeapi.ContainerState_CONTAINER_EXITED ||
		got[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after a stop: %v (first list's now %v), want a new message in state EXITED", stopped, got[0].State)
	}
	if want, err := std.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil || !proto.Equal(&runtimeapi.ListContainersResponse{Containers: stopped}, want) {
		t.Errorf("ListContainers after a stop differs:\n got %v\nwant %v (%v)", stopped, want.GetContainers(), err)
	}
}
