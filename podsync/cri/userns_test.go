package cri

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/runtimeclass"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func usernsPod(uid string) *corev1.Pod {
	pod := busyboxPod(corev1.RestartPolicyAlways, "app")
	pod.Name, pod.UID = uid, types.UID(uid)
	pod.Spec.HostUsers = new(false)
	return pod
}

// TestUsernsAllocator: each pod gets 65536 IDs of its own, container ID 0
// at the first; a second allocator over the same pod root (a restarted
// agent) gives each pod the range it had and no other pod those; a
// released range is reused.
func TestUsernsAllocator(t *testing.T) {
	root := t.TempDir()
	a, err := newUsernsAllocator(UserNamespaceOptions{}, root)
	if err != nil {
		t.Fatal(err)
	}
	yes := func(string) (bool, error) { return true, nil }
	hosts := map[string]uint32{}
	for _, uid := range []string{"a", "b", "c"} {
		ns, err := a.namespace(usernsPod(uid), "", yes)
		if err != nil {
			t.Fatal(err)
		}
		if ns.Mode != runtimeapi.NamespaceMode_POD || len(ns.Uids) != 1 || len(ns.Gids) != 1 || ns.Uids[0].ContainerId != 0 ||
			ns.Uids[0].Length != 65536 || ns.Gids[0].HostId != ns.Uids[0].HostId {
			t.Fatalf("%s: %v", uid, ns)
		}
		hosts[uid] = ns.Uids[0].HostId
	}
	if hosts["a"] != 65536 || hosts["b"] != 2*65536 || hosts["c"] != 3*65536 {
		t.Errorf("ranges %v, want the first three from 65536", hosts)
	}
	data, err := os.ReadFile(filepath.Join(root, "b", "userns"))
	if err != nil || string(data) != `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}` {
		t.Errorf("b's file %s, %v", data, err)
	}
	// The same pod again: the same range.
	if ns, _ := a.namespace(usernsPod("b"), "", yes); ns.Uids[0].HostId != hosts["b"] {
		t.Errorf("b again: %v", ns)
	}
	// A restarted agent.
	a.release("a")
	if _, err := os.Stat(filepath.Join(root, "a", "userns")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a's file after release: %v", err)
	}
	a2, err := newUsernsAllocator(UserNamespaceOptions{}, root)
	if err != nil {
		t.Fatal(err)
	}
	if n := a2.allocated(); n != 2 {
		t.Errorf("%d ranges recorded at start, want 2", n)
	}
	if ns, _ := a2.namespace(usernsPod("c"), "", yes); ns.Uids[0].HostId != hosts["c"] {
		t.Errorf("c after restart: %v", ns)
	}
	if ns, _ := a2.namespace(usernsPod("d"), "", yes); ns.Uids[0].HostId != hosts["a"] {
		t.Errorf("d takes a's freed range: %v", ns)
	}
	// Pods in the host's user namespace.
	for _, hu := range []*bool{nil, new(true)} {
		p := usernsPod("e")
		p.Spec.HostUsers = hu
		if ns, err := a2.namespace(p, "", yes); err != nil || ns.Mode != runtimeapi.NamespaceMode_NODE || len(ns.Uids) != 0 {
			t.Errorf("hostUsers %v: %v, %v", hu, ns, err)
		}
	}
	// Two files claiming one range: the agent does not start.
	if err := os.MkdirAll(filepath.Join(root, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(filepath.Join(root, "c", "userns"))
	if err := os.WriteFile(filepath.Join(root, "x", "userns"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newUsernsAllocator(UserNamespaceOptions{}, root); err == nil || !strings.Contains(err.Error(), "already taken") {
		t.Errorf("conflicting files: %v", err)
	}
}

// TestUsernsAllocatorFull: a range holds Length/IDsPerPod pods and no
// more; the options are checked as the kubelet checks its mappings.
func TestUsernsAllocatorFull(t *testing.T) {
	root := t.TempDir()
	a, err := newUsernsAllocator(UserNamespaceOptions{FirstID: 1 << 20, Length: 2 * 65536, MaxPods: 2}, root)
	if err != nil {
		t.Fatal(err)
	}
	yes := func(string) (bool, error) { return true, nil }
	for i, uid := range []string{"a", "b"} {
		ns, err := a.namespace(usernsPod(uid), "", yes)
		if err != nil || ns.Uids[0].HostId != uint32(1<<20+i*65536) {
			t.Errorf("%s: %v, %v", uid, ns, err)
		}
	}
	if _, err := a.namespace(usernsPod("c"), "", yes); err == nil || err.Error() != "create user namespace: could not find an empty slot to allocate a user namespace" {
		t.Errorf("c: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "c", "userns")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("c's file: %v", err)
	}
	for _, o := range []UserNamespaceOptions{
		{IDsPerPod: 1000},
		{FirstID: 1000, Length: 65536 * 200},
		{FirstID: 0, Length: 65536 * 200},
		{FirstID: 65536, Length: 65536*200 + 1},
		{FirstID: 65536, Length: 65536 * 100},
	} {
		if _, err := newUsernsAllocator(o, root); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if f, n, err := parseSubIDs("0: kubelet 65536 2147483648\n"); f != 65536 || n != 2147483648 || err != nil {
		t.Errorf("parse: %d %d %v", f, n, err)
	}
	for _, bad := range []string{"", "0: kubelet 65536\n", "0: kubelet 1 2\n1: kubelet 3 4\n", "0: kubelet x 2\n"} {
		if _, _, err := parseSubIDs(bad); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

// classes is a fixed set of RuntimeClasses.
type classes map[string]string

func (c classes) LookupRuntimeHandler(_ context.Context, name *string) (string, error) {
	if name == nil || *name == "" {
		return "", nil
	}
	if h, ok := c[*name]; ok {
		return h, nil
	}
	return "", runtimeclass.NotFound(*name)
}

// rcSetup is a syncer over a fake runtime with the given handlers, and
// the container configs it creates.
type rcSetup struct {
	rt      *runtimetest.Runtime
	c       *Syncer
	events  *record.FakeRecorder
	root    string
	mu      sync.Mutex
	configs []*runtimeapi.ContainerConfig
}

func newRCSetup(t *testing.T, handlers []*runtimeapi.RuntimeHandler, cls podsync.RuntimeClasses) *rcSetup {
	t.Helper()
	s := &rcSetup{events: record.NewFakeRecorder(100), root: t.TempDir()}
	s.rt = runtimetest.New(runtimetest.Options{RuntimeHandlers: handlers, Hooks: runtimetest.Hooks{
		CreateContainer: func(_ context.Context, _ string, cfg *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) error {
			s.mu.Lock()
			s.configs = append(s.configs, cfg)
			s.mu.Unlock()
			return nil
		}}})
	var err error
	s.c, err = New(Options{Runtime: s.rt, RuntimeClasses: cls, Recorder: s.events, PodLogRoot: s.root + "/logs", PodRoot: s.root + "/pods", ResolvConf: "-"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sync relists and syncs pod once.
func (s *rcSetup) sync(t *testing.T, pod *corev1.Pod) (podsync.SyncResult, error) {
	t.Helper()
	ctx := context.Background()
	st, err := s.c.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s.c.SyncPod(ctx, pod, st[pod.UID])
}

func (s *rcSetup) event(t *testing.T) string {
	t.Helper()
	select {
	case e := <-s.events.Events:
		return e
	default:
		return ""
	}
}

// TestRuntimeClassHandler: a pod's RuntimeClass gives its sandbox the
// class's handler; a missing class, or a handler the runtime does not
// have, fails the sandbox as the kubelet's: FailedCreatePodSandBox with
// the error, no sandbox, the pod retried.
func TestRuntimeClassHandler(t *testing.T) {
	handlers := []*runtimeapi.RuntimeHandler{{Name: ""}, {Name: "kata-qemu"}}
	s := newRCSetup(t, handlers, classes{"kata": "kata-qemu", "bad": "nope"})
	pod := busyboxPod(corev1.RestartPolicyAlways, "app")
	pod.Spec.RuntimeClassName = new("kata")
	if _, err := s.sync(t, pod); err != nil {
		t.Fatal(err)
	}
	sbs, _ := s.rt.ListPodSandbox(context.Background(), nil)
	if len(sbs) != 1 || sbs[0].RuntimeHandler != "kata-qemu" {
		t.Fatalf("sandboxes %v", sbs)
	}
	for name, want := range map[string]string{
		"missing": `Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclass.node.k8s.io "missing" not found`,
		"bad":     `Warning FailedCreatePodSandBox Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "nope" is configured`,
	} {
		pod := busyboxPod(corev1.RestartPolicyAlways, "app")
		pod.Name, pod.UID = name, types.UID("uid-"+name)
		pod.Spec.RuntimeClassName = new(name)
		for s.event(t) != "" {
		}
		if _, err := s.sync(t, pod); err == nil {
			t.Errorf("%s: no error", name)
		}
		if got := s.event(t); got != want {
			t.Errorf("%s: event %q, want %q", name, got, want)
		}
	}
	if sbs, _ := s.rt.ListPodSandbox(context.Background(), nil); len(sbs) != 1 {
		t.Errorf("sandboxes %v", sbs)
	}
	// Without RuntimeClasses (no API server) no class is found.
	s2 := newRCSetup(t, handlers, nil)
	if _, err := s2.sync(t, pod); err == nil || err.Error() != `runtimeclass.node.k8s.io "kata" not found` {
		t.Errorf("no RuntimeClasses: %v", err)
	}
}

// TestUsernsPod: a pod with hostUsers false on a handler that supports
// user namespaces runs in one of its own, the sandbox and every container
// with the same mapping and the containers' mounts ID-mapped; the range
// is freed when the pod is gone. Other pods get mode NODE, as the
// kubelet's.
func TestUsernsPod(t *testing.T) {
	userns := &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}
	s := newRCSetup(t, []*runtimeapi.RuntimeHandler{{Name: ""}, {Name: "idmap", Features: userns}}, classes{"idmap": "idmap"})
	pod := usernsPod("u1")
	pod.Spec.RuntimeClassName = new("idmap")
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	if _, err := s.sync(t, pod); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sbs, _ := s.rt.ListPodSandbox(ctx, nil)
	if len(sbs) != 1 {
		t.Fatalf("sandboxes %v", sbs)
	}
	st, err := s.rt.PodSandboxStatus(ctx, sbs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.IDMapping{HostId: 65536, ContainerId: 0, Length: 65536}
	sbNS := st.GetStatus().GetLinux().GetNamespaces().GetOptions().GetUsernsOptions()
	if sbNS.GetMode() != runtimeapi.NamespaceMode_POD || len(sbNS.Uids) != 1 || sbNS.Uids[0].String() != want.String() || sbNS.Gids[0].String() != want.String() {
		t.Errorf("sandbox userns %v", sbNS)
	}
	s.mu.Lock()
	cfgs := s.configs
	s.mu.Unlock()
	if len(cfgs) != 1 {
		t.Fatalf("%d containers created", len(cfgs))
	}
	cNS := cfgs[0].GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	if cNS.GetMode() != runtimeapi.NamespaceMode_POD || cNS.Uids[0].String() != want.String() {
		t.Errorf("container userns %v", cNS)
	}
	if len(cfgs[0].Mounts) == 0 {
		t.Fatal("no mounts")
	}
	for _, m := range cfgs[0].Mounts {
		if len(m.UidMappings) != 1 || m.UidMappings[0].String() != want.String() || len(m.GidMappings) != 1 {
			t.Errorf("mount %s: mappings %v %v", m.ContainerPath, m.UidMappings, m.GidMappings)
		}
	}
	if n := s.c.userns.allocated(); n != 1 {
		t.Errorf("%d ranges", n)
	}
	rel, err := s.c.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.SyncTerminatedPod(ctx, pod, rel[pod.UID]); err != nil {
		t.Fatal(err)
	}
	if n := s.c.userns.allocated(); n != 0 {
		t.Errorf("%d ranges after the pod is gone", n)
	}
	// A pod in the host's user namespace: mode NODE, mounts not mapped.
	host := busyboxPod(corev1.RestartPolicyAlways, "app")
	if _, err := s.sync(t, host); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	last := s.configs[len(s.configs)-1]
	s.mu.Unlock()
	if ns := last.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(); ns.GetMode() != runtimeapi.NamespaceMode_NODE || len(ns.Uids) != 0 {
		t.Errorf("host pod userns %v", ns)
	}
}

// TestUsernsRefused: a handler without user namespaces, a runtime that
// reports no handlers (containerd 1.6), or a handler it does not report
// fails the pod's sandbox with the kubelet's message.
func TestUsernsRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handlers []*runtimeapi.RuntimeHandler
		class    string
		want     string
	}{
		{"default handler", []*runtimeapi.RuntimeHandler{{Name: ""}}, "",
			"can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{"class handler", []*runtimeapi.RuntimeHandler{{Name: ""}, {Name: "runc"}}, "runc",
			"can't set `spec.hostUsers: false`, RuntimeClass handler \"runc\" does not support user namespaces"},
		{"no handlers reported", []*runtimeapi.RuntimeHandler{}, "runc",
			"can't set `spec.hostUsers: false`, RuntimeClass handler \"runc\" does not support user namespaces"},
		{"unknown handler", []*runtimeapi.RuntimeHandler{{Name: ""}}, "runc",
			"can't set `spec.hostUsers: false`, RuntimeClass handler \"runc\" does not support user namespaces: the handler \"runc\" is not known"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRCSetup(t, tc.handlers, classes{"runc": "runc"})
			pod := usernsPod("u1")
			if tc.class != "" {
				pod.Spec.RuntimeClassName = new(tc.class)
			}
			if _, err := s.sync(t, pod); err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
			if got := s.event(t); got != "Warning FailedCreatePodSandBox Failed to create pod sandbox: "+tc.want {
				t.Errorf("event %q", got)
			}
			if sbs, _ := s.rt.ListPodSandbox(context.Background(), nil); len(sbs) != 0 {
				t.Errorf("sandboxes %v", sbs)
			}
			if n := s.c.userns.allocated(); n != 0 {
				t.Errorf("%d ranges", n)
			}
		})
	}
}
