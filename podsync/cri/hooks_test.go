package cri

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// A tcpSocket hook, which the kubelet cannot run, fails the postStart as
// the kubelet fails it.
func TestPostStartTCPSocketFails(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
	h.Add(pod)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 0 {
		t.Fatalf("%d running after a tcpSocket postStart", n)
	}
	if !h.Writer.SawWaiting(pod.UID, podsync.ReasonPostStartHookError) {
		t.Error("no PostStartHookError status")
	}
}

func TestPostStartFailureKillsContainer(t *testing.T) {
	h := newHarness(t)
	h.RT.ScriptExec("", []string{"setup"}, runtimetest.ExecScript{ExitCode: 1, Stderr: "setup failed"})
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"setup"}}}}
	h.Add(pod)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 0 {
		t.Fatalf("%d running after a failed postStart", n)
	}
	if !h.Writer.SawWaiting(pod.UID, podsync.ReasonPostStartHookError) {
		t.Error("no PostStartHookError status")
	}
}

func TestSidecarsStartInOrderAndStopLast(t *testing.T) {
	h := newHarness(t)
	pod := withInit(busyboxPod(corev1.RestartPolicyAlways, "app"), true, "proxy", "logger")
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].Image = runtimetest.BusyboxImage
	}
	h.Add(pod)
	h.Steps(2)
	names := map[string]bool{}
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		names[c.Metadata.Name] = true
	}
	if !names["proxy"] || !names["logger"] || !names["app"] {
		t.Fatalf("running %v", names)
	}
	s := h.Writer.Last(pod.UID)
	if s.Phase != corev1.PodRunning || cond(s, corev1.PodInitialized) != "True/" || cond(s, corev1.PodReady) != "True/" {
		t.Fatalf("status %+v", s)
	}
	// The sidecar exits: it is restarted while the app keeps running.
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		if c.Metadata.Name == "proxy" {
			_ = h.RT.Exit(c.Id, 1)
		}
	}
	h.Steps(2)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 3 {
		t.Fatalf("%d running after the sidecar exited", n)
	}
	// Stopping the pod stops the app, then the sidecars in reverse order.
	name := map[string]string{}
	for _, c := range h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING) {
		name[c.Id] = c.Metadata.Name
	}
	h.RT.ResetCalls()
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	h.Steps(3)
	var stopped []string
	for _, c := range h.RT.Calls() {
		if c.Method == "StopContainer" {
			stopped = append(stopped, name[c.ID])
		}
	}
	if len(stopped) != 3 || stopped[0] != "app" || stopped[1] != "logger" || stopped[2] != "proxy" {
		t.Fatalf("stops %v, want app, logger, proxy", stopped)
	}
}

func TestNetworkNotReady(t *testing.T) {
	h := newHarness(t)
	h.RT.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni config uninitialized")
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.HostNetwork = false
	h.Add(pod)
	if sbs, _ := h.RT.ListPodSandbox(h.Ctx, nil); len(sbs) != 0 {
		t.Fatalf("sandbox created without a network: %v", sbs)
	}
	next, _ := h.Eng.SyncOnce(h.Ctx)
	if d := next; d > time.Second {
		t.Errorf("retry in %v, want 1s", d)
	}
	hostPod := busyboxPod(corev1.RestartPolicyAlways, "a")
	hostPod.UID, hostPod.Name = "uid-host", "host"
	h.Add(hostPod)
	if sbs, _ := h.RT.ListPodSandbox(h.Ctx, nil); len(sbs) != 1 {
		t.Fatalf("host-network pod: %d sandboxes", len(sbs))
	}
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/0.log"
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "2026-01-01T00:00:00.000000000Z stdout F line %d\n", i)
	}
	b.WriteString("2026-01-01T00:00:00.000000000Z stderr P part \n2026-01-01T00:00:00.000000000Z stderr F end\n")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := logTail(p)
	if !strings.HasSuffix(got, "line 99\npart end\n") || strings.Count(got, "\n") != logTailLines || strings.Contains(got, "line 20\n") {
		t.Errorf("tail %q", got)
	}
	if logTail(dir+"/missing") != "" {
		t.Error("missing log")
	}
}

func TestNoSyncWhileRelistFails(t *testing.T) {
	h := newHarness(t)
	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	fail := runtimetest.Errors(errors.New("runtime down"))
	h.RT.SetHooks(runtimetest.Hooks{ListContainers: func(context.Context, *runtimeapi.ContainerFilter) error { return fail() }})
	next, err := h.Eng.SyncOnce(h.Ctx)
	if err == nil {
		t.Fatal("relist error not returned")
	}
	if sbs, _ := h.RT.ListPodSandbox(h.Ctx, nil); len(sbs) != 0 {
		t.Fatal("synced on a failed relist")
	}
	if d := next; d != time.Second {
		t.Errorf("next step in %v, want the relist period", d)
	}
	h.Steps(2)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 1 {
		t.Fatalf("%d running after the runtime came back", n)
	}
}

// HTTP GET lifecycle hooks go to the hook's host and port with the
// kubelet's User-Agent, succeed on any response (as the kubelet's do,
// whatever the status) and fail only when no response comes; preStop runs
// while the container still runs.
func TestHTTPGetHooks(t *testing.T) {
	h := newHarness(t)
	type hit struct {
		path, agent  string
		stillRunning bool
	}
	var mu sync.Mutex
	var hits []hit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)) > 0
		mu.Lock()
		hits = append(hits, hit{r.URL.Path, r.Header.Get("User-Agent"), running})
		mu.Unlock()
		if r.URL.Path == "/start" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	get := func(path string, port int) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(port), Path: path}}
	}

	pod := busyboxPod(corev1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: get("/start", port), PreStop: get("/stop", port)}
	h.Add(pod)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 1 {
		t.Fatalf("%d running after a postStart hook answered 500, want 1", n)
	}
	h.Eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{pod}})
	h.Steps(3)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 0 {
		t.Fatalf("%d running after removal", n)
	}
	mu.Lock()
	got := append([]hit(nil), hits...)
	mu.Unlock()
	want := []hit{{"/start", "kube-lifecycle/1.37", true}, {"/stop", "kube-lifecycle/1.37", true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hook requests %+v, want %+v", got, want)
	}

	// No response at all: the postStart hook fails and the container is killed.
	closed := httptest.NewServer(http.NotFoundHandler())
	cu, _ := url.Parse(closed.URL)
	closedPort, _ := strconv.Atoi(cu.Port())
	closed.Close()
	bad := busyboxPod(corev1.RestartPolicyAlways, "a")
	bad.UID, bad.Name = "uid-bad", "bad"
	bad.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: get("/start", closedPort)}
	h.Add(bad)
	if n := len(h.Containers(runtimeapi.ContainerState_CONTAINER_RUNNING)); n != 0 {
		t.Fatalf("%d running after a postStart hook got no response", n)
	}
	w := h.Writer.Last(bad.UID).ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != podsync.ReasonPostStartHookError || !strings.Contains(w.Message, `HTTP lifecycle hook (/start) for Container "a" in Pod "bad_default(uid-bad)" failed`) {
		t.Errorf("waiting %+v", w)
	}
}
