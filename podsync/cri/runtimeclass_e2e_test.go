package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"net/http"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/runtimeclass"
	criruntime "github.com/nodekit/nodekit/runtime"
)

// eventLog records events ("<type> <reason> <message>") without ever
// blocking.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(_ runtime.Object, typ, reason, msg string) {
	l.mu.Lock()
	l.events = append(l.events, typ+" "+reason+" "+msg)
	l.mu.Unlock()
}

func (l *eventLog) Eventf(o runtime.Object, typ, reason, format string, args ...any) {
	l.Event(o, typ, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(o runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Eventf(o, typ, reason, format, args...)
}

func (l *eventLog) has(e string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.events, e)
}

func (l *eventLog) matches(re *regexp.Regexp) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.events, re.MatchString)
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, "\n")
}

// ownClient is a clientset on a connection of its own that goes when the
// test is done with it (the leak checks): it closes itself once idle, and
// the cleanup closes it if it is idle already. (The clientsets of
// controlplane share client-go's cached transports, whose connections
// stay.)
func ownClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	var transport http.RoundTripper
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if ht, ok := rt.(*http.Transport); ok {
			ht.IdleConnTimeout = 100 * time.Millisecond
		}
		transport = rt
		return rt
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(transport) })
	return cs
}

// e2eRuntimeClasses creates the RuntimeClasses (name to handler) until the
// test ends, and returns a Manager that reads them as the node does,
// running until then. The classes are created once the Manager has
// listed, and it returns once the Manager's watch has shown them all: its
// connection and watch are then in place before the test's leak check
// (called after this), which sees the engine's goroutines only (the
// Manager's own are podsync/runtimeclass's tests').
func e2eRuntimeClasses(t *testing.T, cp *controlplane.ControlPlane, handlers map[string]string) *runtimeclass.Manager {
	t.Helper()
	ctx := context.Background()
	admin := ownClient(t, cp.AdminConfig()).NodeV1().RuntimeClasses()
	cfg, err := cp.NodeConfig("rc-node")
	if err != nil {
		t.Fatal(err)
	}
	node := ownClient(t, cfg)
	m, err := runtimeclass.New(runtimeclass.Options{Client: node.NodeV1().RuntimeClasses()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runtime classes: %v", err)
		}
	})
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "RuntimeClasses listed", m.HasSynced)
	for name, h := range handlers {
		if _, err := admin.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: h}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(ctx, name, metav1.DeleteOptions{}) })
	}
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "RuntimeClasses watched", func() bool {
		for name, h := range handlers {
			if got, err := m.LookupRuntimeHandler(ctx, &name); err != nil || got != h {
				return false
			}
		}
		return true
	})
	return m
}

// waitPendingCreating waits for the pod to be Pending with its container
// waiting in ContainerCreating (its sandbox not made), and checks that
// containerd holds nothing.
func (e *e2e) waitPendingCreating(pod *corev1.Pod) {
	e.t.Helper()
	e.waitStatus(pod, "Pending, ContainerCreating", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodPending && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Waiting != nil &&
			s.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating"
	})
	if sbs, err := e.rt.ListPodSandbox(context.Background(), nil); err != nil || len(sbs) != 0 {
		e.t.Errorf("sandboxes %v, %v", sbs, err)
	}
}

// noSandboxSeccomp is the runtime with the seccomp profile of sandboxes on
// the runc-idmap handler taken out: the sandbox config asks for
// RuntimeDefault, as the kubelet's always does, and the test binaries'
// runc, built without seccomp, refuses any profile ("seccomp: config
// provided but seccomp not supported"). The syncer's config is otherwise
// sent as it made it.
type noSandboxSeccomp struct{ criruntime.Runtime }

func (r noSandboxSeccomp) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if handler == containerdtest.IDMapRuntimeHandler {
		cfg = proto.Clone(cfg).(*runtimeapi.PodSandboxConfig)
		cfg.Linux.SecurityContext.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
	return r.Runtime.RunPodSandbox(ctx, cfg, handler)
}

// A pod with hostUsers false on a RuntimeClass whose handler has user
// namespaces (containerd 2's runc-idmap) runs in a user namespace of its
// own: its container sees the 65536 IDs from the host ID nodekit
// allocated and wrote into the pod's directory; a restarted syncer keeps
// the running pod on that range and gives a second pod the next; the
// files and ranges go with the pods. On containerd 1.6, which reports no runtime handlers, its sandbox
// fails with the kubelet's message and the pod stays Pending.
//
// Seccomp: the runc of runc-idmap is built without seccomp and refuses any
// profile, so the pod asks for none (its container gets the syncer's
// default, Unconfined) and the test drops the RuntimeDefault profile the
// sandbox config always has (noSandboxSeccomp).
func TestE2EUserNamespace(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2EUserNamespace) }

func testE2EUserNamespace(t *testing.T, c *containerdtest.Containerd) {
	cp := controlplane.Need(t, cp)
	if c.Major == 2 && c.IDMapHandler == "" {
		t.Skip("containerd 2 without the test binaries' runc (hack/testbin.sh builds it): no handler with user namespaces")
	}
	name := fmt.Sprintf("userns-%d", c.Major)
	classes := e2eRuntimeClasses(t, cp, map[string]string{name: containerdtest.IDMapRuntimeHandler})
	t.Cleanup(leakcheck.Check(t)) // runs after e.stop
	// API validation refuses hostUsers false on the host network: the pod
	// is on a bridge network where it runs, and waits for no network where
	// it is refused (as the kubelet, nodekit holds pod-network pods while
	// the runtime's network is not ready).
	if c.IDMapHandler != "" {
		bridgeNetwork(t, c)
	} else if err := c.EnableNetwork(context.Background()); err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	podRoot := t.TempDir()
	// The pod's files (hosts, termination log) are ID-mapped bind mounts:
	// their directory must be searchable by the pod's host IDs.
	if err := os.Chmod(filepath.Dir(podRoot), 0o711); err != nil {
		t.Fatal(err)
	}
	e := startE2E(t, c, podRoot, func(o *Options) {
		o.RuntimeClasses, o.Recorder, o.Runtime = classes, events, noSandboxSeccomp{o.Runtime}
	})
	t.Cleanup(func() { e.stop() }) // the engine running at the end
	pod := e2ePod(c, "userns", corev1.RestartPolicyAlways, "sh", "-c", "cat /proc/self/uid_map; echo hi > /scratch/$HOSTNAME; "+sleeper)
	pod.Spec.HostNetwork, pod.Spec.HostUsers, pod.Spec.RuntimeClassName = false, new(false), new(name)
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	if c.IDMapHandler == "" {
		want := "Warning FailedCreatePodSandBox Failed to create pod sandbox: can't set `spec.hostUsers: false`, RuntimeClass handler \"runc-idmap\" does not support user namespaces"
		testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "refused as the kubelet refuses it", func() bool { return events.has(want) })
		e.waitPendingCreating(pod)
		e.remove(pod)
		return
	}
	e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	host := mappedHost(t, podRoot, pod)
	checkUIDMap(t, c, pod, host)
	// The emptyDir is an ID-mapped mount: what the container's root writes
	// is the host's root's on disk, not the pod's host ID's.
	written := filepath.Join(podRoot, string(pod.UID), "volumes", "kubernetes.io~empty-dir", "scratch", pod.Name)
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "the file written in the emptyDir", func() bool {
		_, err := os.Stat(written)
		return err == nil
	})
	if st, err := os.Stat(written); err != nil {
		t.Error(err)
	} else if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Errorf("the container's file on the host is uid %d's, want 0's", uid)
	}
	ctx := context.Background()
	sbs, err := e.rt.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes %v, %v", sbs, err)
	}

	// A restarted agent reads the range from the pod's directory: the pod
	// keeps its sandbox and range, and another pod gets the next range.
	e.stop()
	e = startE2E(t, c, podRoot, func(o *Options) {
		o.RuntimeClasses, o.Recorder, o.Runtime = classes, events, noSandboxSeccomp{o.Runtime}
	})
	if n := e.cri.userns.allocated(); n != 1 {
		t.Errorf("%d ranges read at start, want 1", n)
	}
	pod2 := pod.DeepCopy()
	pod2.Name, pod2.UID = "userns2", "uid-userns2"
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{pod, pod2}})
	e.waitStatus(pod2, "the second pod Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	e.waitStatus(pod, "the first pod Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	if got := mappedHost(t, podRoot, pod); got != host {
		t.Errorf("after the restart the first pod's range is at %d, was %d", got, host)
	}
	host2 := mappedHost(t, podRoot, pod2)
	if host2 == host {
		t.Errorf("both pods have the range at %d", host)
	}
	checkUIDMap(t, c, pod2, host2)
	if after, err := e.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: sbs[0].Id}); err != nil || len(after) != 1 ||
		after[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("the first pod's sandbox after the restart: %v, %v", after, err)
	}

	// Gone, with their directories and ranges.
	now := metav1.Now()
	grace := int64(1)
	var gone []*corev1.Pod
	for _, p := range []*corev1.Pod{pod, pod2} {
		d := p.DeepCopy()
		d.DeletionTimestamp, d.DeletionGracePeriodSeconds = &now, &grace
		gone = append(gone, d)
	}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: gone})
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: gone})
	e.waitEmpty()
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "the pods' directories and ranges gone", func() bool {
		_, err1 := os.Stat(filepath.Join(podRoot, string(pod.UID)))
		_, err2 := os.Stat(filepath.Join(podRoot, string(pod2.UID)))
		return os.IsNotExist(err1) && os.IsNotExist(err2) && e.cri.userns.allocated() == 0
	})
}

// mappedHost is the first host ID of the pod's range, from the mapping
// file in its directory; it checks the file's form.
func mappedHost(t *testing.T, podRoot string, pod *corev1.Pod) uint32 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(podRoot, string(pod.UID), "userns"))
	if err != nil {
		t.Fatal(err)
	}
	var m usernsMapping
	if err := json.Unmarshal(data, &m); err != nil || len(m.UIDMappings) != 1 || len(m.GIDMappings) != 1 {
		t.Fatalf("mapping file %s: %v", data, err)
	}
	host := m.UIDMappings[0].HostID
	if host == 0 || host%65536 != 0 || m.UIDMappings[0].Length != 65536 || m.UIDMappings[0].ContainerID != 0 || m.GIDMappings[0] != m.UIDMappings[0] {
		t.Errorf("mapping %+v", m)
	}
	return host
}

// checkUIDMap checks that the pod's container printed a uid_map of 65536
// IDs from container ID 0 to host ID host.
func checkUIDMap(t *testing.T, c *containerdtest.Containerd, pod *corev1.Pod, host uint32) {
	t.Helper()
	var uidMap string
	log := filepath.Join(c.PodLogRoot, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), "app", "0.log")
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "uid_map in the log", func() bool {
		b, _ := os.ReadFile(log)
		for _, line := range strings.Split(string(b), "\n") {
			// CRI log lines: <time> stdout F <text>
			if f := strings.SplitN(line, " ", 4); len(f) == 4 && f[1] == "stdout" {
				uidMap = f[3]
				return true
			}
		}
		return false
	})
	t.Logf("%s: uid_map %q; the pod's range from host ID %d", pod.Name, uidMap, host)
	if got := strings.Fields(uidMap); !slices.Equal(got, []string{"0", fmt.Sprint(host), "65536"}) {
		t.Errorf("%s: uid_map %q, want 0 %d 65536", pod.Name, uidMap, host)
	}
}

// A pod naming a RuntimeClass that does not exist, or one whose handler
// the runtime does not have, fails its sandbox as the kubelet's does
// (FailedCreatePodSandBox with the error, the pod Pending); a class naming
// the runtime's "runc" handler runs, its sandbox on that handler.
func TestE2ERuntimeClass(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2ERuntimeClass) }

func testE2ERuntimeClass(t *testing.T, c *containerdtest.Containerd) {
	cp := controlplane.Need(t, cp)
	suffix := fmt.Sprintf("-%d", c.Major)
	classes := e2eRuntimeClasses(t, cp, map[string]string{"runc" + suffix: "runc", "nohandler" + suffix: "no-such-handler"})
	t.Cleanup(leakcheck.Check(t))
	events := &eventLog{}
	e := startE2E(t, c, t.TempDir(), func(o *Options) { o.RuntimeClasses, o.Recorder = classes, events })
	t.Cleanup(e.stop)

	// The runtime's error as the kubelet's CRI client gives it: containerd
	// 2 names the sandbox it did not start.
	noRuntime := `failed to get sandbox runtime: no runtime for "no-such-handler" is configured`
	if c.Major == 2 {
		noRuntime = `unable to get OCI runtime for sandbox "[0-9a-f]{64}": no runtime for "no-such-handler" is configured`
	}
	for _, tc := range []struct{ class, event string }{
		{"missing" + suffix, regexp.QuoteMeta(`Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclass.node.k8s.io "missing` + suffix + `" not found`)},
		{"nohandler" + suffix, `Warning FailedCreatePodSandBox Failed to create pod sandbox: rpc error: code = Unknown desc = ` + noRuntime},
	} {
		pod := e2ePod(c, tc.class, corev1.RestartPolicyAlways, "sh", "-c", sleeper)
		pod.Spec.RuntimeClassName = new(tc.class)
		e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
		re := regexp.MustCompile("^" + tc.event + "$")
		testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, tc.class+": the kubelet's event", func() bool { return events.matches(re) })
		e.waitPendingCreating(pod)
		e.remove(pod)
	}
	if t.Failed() {
		t.Logf("events:\n%s", events)
	}

	pod := e2ePod(c, "runc", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	pod.Spec.RuntimeClassName = new("runc" + suffix)
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	sbs, err := e.rt.ListPodSandbox(context.Background(), nil)
	if err != nil || len(sbs) != 1 || sbs[0].RuntimeHandler != "runc" {
		t.Errorf("sandboxes %v, %v", sbs, err)
	}
	e.remove(pod)
}

// The API server's RuntimeClass admission copies a class's overhead into
// the pod's spec.overhead; nodekit counts it where the kubelet does: in
// the admission requests (OutOfcpu) and the pod cgroup's limits.
func TestIntegrationRuntimeClassOverhead(t *testing.T) {
	cp := controlplane.Need(t, cp)
	ctx := context.Background()
	admin := cp.AdminClient()
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "with-overhead"}, Handler: "runc", Overhead: &nodev1.Overhead{PodFixed: overhead}}
	if _, err := admin.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.NodeV1().RuntimeClasses().Delete(ctx, rc.Name, metav1.DeleteOptions{}) })
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "overhead", Namespace: "default"}, Spec: corev1.PodSpec{
		RuntimeClassName: new(rc.Name),
		Containers:       []corev1.Container{{Name: "app", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: limits, Requests: limits}}}}}
	created, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods("default").Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	})
	if got := created.Spec.Overhead; got.Cpu().Cmp(overhead[corev1.ResourceCPU]) != 0 || got.Memory().Cmp(overhead[corev1.ResourceMemory]) != 0 {
		t.Fatalf("spec.overhead %v, want the class's %v", got, overhead)
	}
	// A node with 700m of CPU fits the containers (500m), not them and the
	// overhead.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("700m"),
			corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
	pr, err := admission.New(admission.Options{Node: func() (*corev1.Node, error) { return node, nil }})
	if err != nil {
		t.Fatal(err)
	}
	bound := created.DeepCopy()
	bound.Spec.NodeName = "n1"
	if r := pr.Admit(bound, nil); r.Admit || r.Reason != "OutOfcpu" {
		t.Errorf("admission: %+v, want OutOfcpu", r)
	}
	without := bound.DeepCopy()
	without.Spec.Overhead = nil
	if r := pr.Admit(without, nil); !r.Admit {
		t.Errorf("without the overhead: %+v", r)
	}
	// The pod cgroup: the limits plus the overhead.
	if r := podResourceConfig(created); r.quota != 75000 || r.memoryLimit != (128+64)<<20 {
		t.Errorf("pod cgroup %+v, want quota 75000 and memory %d", r, (128+64)<<20)
	}
}
