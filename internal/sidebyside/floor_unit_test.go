package sidebyside

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A pod's Started runs with its slot given back: with one slot, both pods
// are in their Started at once (whichever started first), and each pod's
// time runs until its Started returns.
func TestStartPodsStartedOutsideTheSlot(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	var mu sync.Mutex
	var firstRun time.Time // the first RunPodSandbox: StartPods' clock started before it
	rt.SetHooks(runtimetest.Hooks{RunPodSandbox: func(context.Context, *runtimeapi.PodSandboxConfig, string) error {
		mu.Lock()
		defer mu.Unlock()
		if firstRun.IsZero() {
			firstRun = time.Now()
		}
		return nil
	}})
	var inStarted sync.WaitGroup
	inStarted.Add(2)
	both := make(chan struct{})
	go func() { inStarted.Wait(); close(both) }()
	returned := make([]time.Time, 2)
	containers := make([]int, 2)
	pods := make([]RuntimePod, 2)
	for i, name := range []string{"first", "second"} {
		pods[i] = RuntimePod{
			Sandbox: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}},
			Containers: []*runtimeapi.ContainerConfig{{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
				Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}},
			Started: func(_ context.Context, ids []string) error {
				containers[i] = len(ids)
				inStarted.Done()
				select {
				case <-both:
				case <-time.After(30 * time.Second):
					t.Errorf("pod %s: the other pod did not start while this one waited in Started", name)
				}
				returned[i] = time.Now()
				return nil
			},
		}
	}
	ids, took, err := StartPods(context.Background(), rt, pods, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] == "" || ids[1] == "" || containers[0] != 1 || containers[1] != 1 {
		t.Fatalf("sandboxes %q, containers given to Started %v; want two sandboxes, one container each", ids, containers)
	}
	for i := range pods {
		if atLeast := returned[i].Sub(firstRun); took[i] < atLeast {
			t.Errorf("pod %d took %v; want at least %v, until its Started returned", i, took[i], atLeast)
		}
	}
	cs, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil || len(cs) != 2 {
		t.Errorf("running containers %d (%v), want 2", len(cs), err)
	}
}

// A stop that runs out of time is asked again; one that fails otherwise is
// not.
func TestRemovePodsRetriesAStopOutOfTime(t *testing.T) {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{})
	var ids []string
	for _, name := range []string{"a", "b"} {
		id, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	rt.SetHooks(runtimetest.Hooks{StopPodSandbox: func(_ context.Context, id string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[id]++
		switch {
		case id == ids[0] && calls[id] < 3:
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		case id == ids[1] && calls[id] < 3:
			return status.Error(codes.Unavailable, "gone")
		}
		return nil
	}})
	_, _, err := RemovePods(ctx, rt, ids, 2)
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("RemovePods: %v; want the Unavailable stop's error", err)
	}
	if calls[ids[0]] != 3 || calls[ids[1]] != 1 {
		t.Errorf("stops asked %d and %d times; want 3 (twice out of time) and 1", calls[ids[0]], calls[ids[1]])
	}
}

// The floor's configs carry what podsync/cri's configs of the same pod
// (the agent's, which are the kubelet's) carry that the runtime acts on:
// the sandbox's seccomp profile, the containers' mounts, resources,
// namespaces and seccomp profile.
func TestAsNodesSendMatchesTheNodesConfigs(t *testing.T) {
	var mu sync.Mutex
	var nodeSB *runtimeapi.PodSandboxConfig
	var nodeC *runtimeapi.ContainerConfig
	rt := runtimetest.New(runtimetest.Options{})
	rt.SetHooks(runtimetest.Hooks{
		RunPodSandbox: func(_ context.Context, c *runtimeapi.PodSandboxConfig, _ string) error {
			mu.Lock()
			defer mu.Unlock()
			nodeSB = proto.Clone(c).(*runtimeapi.PodSandboxConfig)
			return nil
		},
		CreateContainer: func(_ context.Context, _ string, c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) error {
			mu.Lock()
			defer mu.Unlock()
			nodeC = proto.Clone(c).(*runtimeapi.ContainerConfig)
			return nil
		},
	})
	root := t.TempDir()
	syncer, err := cri.New(cri.Options{Runtime: rt, PodLogRoot: filepath.Join(root, "logs"), PodRoot: filepath.Join(root, "pods"), ResolvConf: "-"})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSDefault,
			Containers: []corev1.Container{{Name: "app", Image: runtimetest.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", podCommand}, TerminationMessagePath: corev1.TerminationMessagePathDefault}}}}
	if _, err := syncer.SyncPod(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if nodeSB == nil || nodeC == nil {
		t.Fatalf("the agent's syncer made no sandbox or container: %v, %v", nodeSB, nodeC)
	}

	fp := RuntimePod{
		Sandbox: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "uid-p"},
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER,
					UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}}}}},
		Containers: []*runtimeapi.ContainerConfig{{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image: &runtimeapi.ImageSpec{Image: runtimetest.BusyboxImage}}},
	}
	podDir := filepath.Join(root, "floor", "uid-p")
	if err := AsNodesSend(&fp, podDir, "/etc/hosts"); err != nil {
		t.Fatal(err)
	}
	if got, want := fp.Sandbox.Linux.SecurityContext.Seccomp, nodeSB.GetLinux().GetSecurityContext().GetSeccomp(); !proto.Equal(got, want) {
		t.Errorf("sandbox seccomp: floor %v, nodes %v", got, want)
	}
	fc := fp.Containers[0]
	paths := func(ms []*runtimeapi.Mount) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ContainerPath)
		}
		slices.Sort(out)
		return out
	}
	if got, want := paths(fc.Mounts), paths(nodeC.Mounts); !slices.Equal(got, want) {
		t.Errorf("container mounts: floor %v, nodes %v", got, want)
	}
	for _, m := range fc.Mounts {
		if _, err := os.Stat(m.HostPath); err != nil {
			t.Errorf("mount %s: %v", m.ContainerPath, err)
		}
	}
	nr := nodeC.GetLinux().GetResources()
	if got := fc.Linux.Resources; got.CpuShares != nr.GetCpuShares() || got.OomScoreAdj != nr.GetOomScoreAdj() {
		t.Errorf("container resources: floor %v, nodes %v", got, nr)
	}
	nsc := nodeC.GetLinux().GetSecurityContext()
	if got := fc.Linux.SecurityContext; !proto.Equal(got.NamespaceOptions, nsc.GetNamespaceOptions()) || !proto.Equal(got.Seccomp, nsc.GetSeccomp()) {
		t.Errorf("container namespaces and seccomp: floor %v / %v, nodes %v / %v", got.NamespaceOptions, got.Seccomp, nsc.GetNamespaceOptions(), nsc.GetSeccomp())
	}
}

func TestAsNodesSendNeedsALinuxSandbox(t *testing.T) {
	p := RuntimePod{Sandbox: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "bare"}}}
	err := AsNodesSend(&p, t.TempDir(), "/etc/hosts")
	if err == nil || !strings.Contains(err.Error(), `"bare"`) {
		t.Fatalf("got %v, want an error naming the sandbox", err)
	}
}

// The arrivals outside the window are left out; the rest are summed and
// counted by size, smallest first.
func TestSummarizeArrivals(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	arrivals := []arrival{
		{at(-1), 9999}, // before the window
		{at(0), 623}, {at(10), 4504}, {at(20), 623}, {at(30), 114},
		{at(301), 7777}, // after it
	}
	got := summarizeArrivals(arrivals, at(0), at(300))
	if want := "5864 bytes: 114×1 623×2 4504×1"; got != want {
		t.Errorf("summarizeArrivals = %q, want %q", got, want)
	}
	if got, want := summarizeArrivals(nil, at(0), at(300)), "0 bytes: "; got != want {
		t.Errorf("summarizeArrivals(nil) = %q, want %q", got, want)
	}
}
