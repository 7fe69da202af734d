package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/remote"
)

// The fault tests run an agent with pods on each of the harness's
// containerds (the host's 1.x and containerd 2, in parallel) and the test
// control plane, break one thing under it (containerd stopped or
// killed, the agent killed mid-way, the API server down) and check that
// nothing was lost (the same containers run, statuses never regress) and
// nothing was left behind (no duplicate or orphan in the runtime once the
// pods are deleted).

// faultPod is an API pod bound to node: host-network busybox that sleeps
// until SIGTERM.
func faultPod(node, name, image string) *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"fault-test": node}},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", sleeper}}}},
	}
}

// createPods creates n fault pods named prefix-0 … prefix-<n-1> on node and
// deletes them at cleanup (at once, if the test has not).
func createPods(ctx context.Context, t *testing.T, admin kubernetes.Interface, c *containerdtest.Containerd, node, prefix string, n int) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := admin.CoreV1().Pods("default").Create(ctx, faultPod(node, name, c.BusyboxImage), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	t.Cleanup(func() {
		zero := int64(0)
		for _, name := range names {
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})
	return names
}

// nodePods lists the pods bound to node in the API.
func nodePods(ctx context.Context, admin kubernetes.Interface, node string) ([]corev1.Pod, error) {
	list, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// runningReady reports whether every pod named in names is in the API,
// Running and Ready.
func runningReady(ctx context.Context, admin kubernetes.Interface, node string, names []string) bool {
	pods, err := nodePods(ctx, admin, node)
	if err != nil {
		return false
	}
	ok := map[string]bool{}
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && pods[i].Status.Phase == corev1.PodRunning && podReady(&pods[i]) {
			ok[pods[i].Name] = true
		}
	}
	for _, n := range names {
		if !ok[n] {
			return false
		}
	}
	return true
}

// apiContainers returns, per pod name, its containers' "containerID
// restartCount" as the API reports them.
func apiContainers(ctx context.Context, t *testing.T, admin kubernetes.Interface, node string) map[string]string {
	t.Helper()
	pods, err := nodePods(ctx, admin, node)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		var parts []string
		for _, cs := range p.Status.ContainerStatuses {
			parts = append(parts, fmt.Sprintf("%s=%s/%d", cs.Name, cs.ContainerID, cs.RestartCount))
		}
		sort.Strings(parts)
		out[p.Name] = strings.Join(parts, ",")
	}
	return out
}

// criPod is what the runtime holds of one pod (by the io.kubernetes.pod.uid
// label).
type criPod struct {
	name       string
	sandboxes  []string // "id state", sorted
	containers []string // "name id state attempt", sorted
}

// criState lists the runtime's sandboxes and containers by pod UID.
func criState(ctx context.Context, t *testing.T, rt *remote.Client) map[string]*criPod {
	t.Helper()
	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*criPod{}
	get := func(labels map[string]string) *criPod {
		uid := labels["io.kubernetes.pod.uid"]
		if out[uid] == nil {
			out[uid] = &criPod{name: labels["io.kubernetes.pod.name"]}
		}
		return out[uid]
	}
	for _, sb := range sbs {
		p := get(sb.Labels)
		p.sandboxes = append(p.sandboxes, sb.Id+" "+sb.State.String())
	}
	for _, c := range cs {
		p := get(c.Labels)
		p.containers = append(p.containers, fmt.Sprintf("%s %s %s %d", c.Metadata.Name, c.Id, c.State, c.Metadata.Attempt))
	}
	for _, p := range out {
		sort.Strings(p.sandboxes)
		sort.Strings(p.containers)
	}
	return out
}

// describeCRI prints a criState for a failure message.
func describeCRI(s map[string]*criPod) string {
	var b strings.Builder
	for _, uid := range slices.Sorted(maps.Keys(s)) {
		p := s[uid]
		fmt.Fprintf(&b, "\n  %s (uid %s): sandboxes %v containers %v", p.name, uid, p.sandboxes, p.containers)
	}
	return b.String()
}

// checkOnePerPod checks that the runtime holds exactly one sandbox, ready,
// and one running container per pod in want (name → UID), and nothing
// else.
func checkOnePerPod(t *testing.T, s map[string]*criPod, want map[string]types.UID) {
	t.Helper()
	for _, p := range onePerPodProblems(s, want) {
		t.Error(p)
	}
}

// waitOnePerPod waits up to a minute for the runtime to hold what
// checkOnePerPod wants: a sandbox that a killed agent left half-made is
// replaced by a new one and removed by the sync that replaced it.
func waitOnePerPod(ctx context.Context, t *testing.T, rt *remote.Client, want map[string]types.UID) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(time.Minute)
	for {
		problems = onePerPodProblems(criState(ctx, t, rt), want)
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func onePerPodProblems(s map[string]*criPod, want map[string]types.UID) []string {
	var out []string
	byUID := map[string]string{}
	for name, uid := range want {
		byUID[string(uid)] = name
	}
	for uid, p := range s {
		name, ok := byUID[uid]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("runtime holds pod %s (uid %s) that should not run: %v %v", p.name, uid, p.sandboxes, p.containers))
		case len(p.sandboxes) != 1 || !strings.HasSuffix(p.sandboxes[0], " "+runtimeapi.PodSandboxState_SANDBOX_READY.String()):
			out = append(out, fmt.Sprintf("pod %s: sandboxes %v; want exactly one, ready", name, p.sandboxes))
		case len(p.containers) != 1 || !strings.Contains(p.containers[0], " "+runtimeapi.ContainerState_CONTAINER_RUNNING.String()+" "):
			out = append(out, fmt.Sprintf("pod %s: containers %v; want exactly one, running", name, p.containers))
		}
	}
	for uid, name := range byUID {
		if s[uid] == nil {
			out = append(out, fmt.Sprintf("pod %s (uid %s) has nothing in the runtime", name, uid))
		}
	}
	sort.Strings(out)
	return out
}

// podRecorder watches every update of the pods bound to a node (an
// informer: it lists again after the API server comes back) and records
// what a fault must never cause: a pod Failed, a Running pod reported
// Pending again, a running container reported terminated or waiting,
// replaced (another ID) or restarted (restartCount changed), and a pod
// name seen with a second UID (a mirror pod or an API pod recreated).
type podRecorder struct {
	stop chan struct{}
	done chan struct{}

	mu         sync.Mutex
	updates    int
	violations []string
	uids       map[string][]types.UID // by namespace/name, in order seen
	frozen     bool
	ignored    map[string]bool     // namespace/name of pods that are meant to end
	history    map[string][]string // by namespace/name: each update's phase and containers
	bad        map[string]bool     // namespace/name of pods with a violation
}

// Ignore stops checking the pod namespace/name: the test removes it.
func (r *podRecorder) Ignore(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ignored[key] = true
}

func newPodRecorder(t *testing.T, admin kubernetes.Interface, node string) *podRecorder {
	r := &podRecorder{stop: make(chan struct{}), done: make(chan struct{}), uids: map[string][]types.UID{}, ignored: map[string]bool{},
		history: map[string][]string{}, bad: map[string]bool{}}
	lw := cache.NewListWatchFromClient(admin.CoreV1().RESTClient(), "pods", corev1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", node))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.observe(nil, obj.(*corev1.Pod)) },
		UpdateFunc: func(old, obj any) {
			r.observe(old.(*corev1.Pod), obj.(*corev1.Pod))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { inf.Run(r.stop); close(r.done) }()
	t.Cleanup(r.Stop)
	if !cache.WaitForCacheSync(r.stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return r
}

// Stop ends the watch: from here on the pods may be deleted.
func (r *podRecorder) Stop() {
	r.mu.Lock()
	already := r.frozen
	r.frozen = true
	r.mu.Unlock()
	if !already {
		close(r.stop)
		<-r.done
	}
}

func (r *podRecorder) observe(old, pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return
	}
	r.updates++
	key := pod.Namespace + "/" + pod.Name
	if r.ignored[key] {
		return
	}
	r.history[key] = append(r.history[key], fmt.Sprintf("rv %s %s %v", pod.ResourceVersion, pod.Status.Phase, describeContainers(pod)))
	if uids := r.uids[key]; len(uids) == 0 || uids[len(uids)-1] != pod.UID {
		r.uids[key] = append(uids, pod.UID)
		if len(uids) > 0 {
			r.violations = append(r.violations, fmt.Sprintf("%s recreated: uid %s after %v", key, pod.UID, uids))
		}
	}
	bad := func(format string, args ...any) {
		r.bad[key] = true
		r.violations = append(r.violations, fmt.Sprintf("%s (rv %s): ", key, pod.ResourceVersion)+fmt.Sprintf(format, args...))
	}
	if pod.Status.Phase == corev1.PodFailed {
		bad("phase Failed (%s: %s)", pod.Status.Reason, pod.Status.Message)
	}
	if old == nil || old.UID != pod.UID {
		return
	}
	if old.Status.Phase == corev1.PodRunning && pod.Status.Phase != corev1.PodRunning {
		bad("phase %s after Running; containers %v after %v", pod.Status.Phase, describeContainers(pod), describeContainers(old))
	}
	was := map[string]corev1.ContainerStatus{}
	for _, cs := range old.Status.ContainerStatuses {
		was[cs.Name] = cs
	}
	for _, cs := range pod.Status.ContainerStatuses {
		o, ok := was[cs.Name]
		if !ok {
			continue
		}
		if o.State.Running == nil {
			continue
		}
		if cs.State.Running == nil {
			bad("container %s %v after running", cs.Name, describeState(cs.State))
		}
		if cs.ContainerID != o.ContainerID {
			bad("container %s ID %s after %s, running", cs.Name, cs.ContainerID, o.ContainerID)
		}
		if cs.RestartCount != o.RestartCount {
			bad("container %s restartCount %d after %d, running", cs.Name, cs.RestartCount, o.RestartCount)
		}
	}
}

// describeContainers describes the pod's container statuses.
func describeContainers(pod *corev1.Pod) []string {
	var out []string
	for _, cs := range pod.Status.ContainerStatuses {
		out = append(out, fmt.Sprintf("%s %s %s (restartCount %d, last %s)", cs.Name, cs.ContainerID, describeState(cs.State), cs.RestartCount, describeState(cs.LastTerminationState)))
	}
	return out
}

func describeState(s corev1.ContainerState) string {
	switch {
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (%s, exit %d: %s)", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message)
	case s.Waiting != nil:
		return fmt.Sprintf("waiting (%s: %s)", s.Waiting.Reason, s.Waiting.Message)
	case s.Running != nil:
		return "running"
	}
	return "unknown"
}

// check fails t with every violation recorded so far, and logs how many
// updates were seen.
func (r *podRecorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("%d pod updates watched", r.updates)
	for _, v := range r.violations {
		t.Errorf("pod update: %s", v)
	}
	for _, key := range slices.Sorted(maps.Keys(r.bad)) {
		t.Logf("updates of %s:\n  %s", key, strings.Join(r.history[key], "\n  "))
	}
}

// uidsOf returns the UIDs seen for namespace/name.
func (r *podRecorder) uidsOf(key string) []types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.uids[key])
}

// syncCount returns the agent's count of pod syncs of an operation type
// (kubelet_pod_worker_duration_seconds), or -1 while it cannot be read.
func syncCount(p *agentProc, op string) float64 {
	m, err := p.fetch("/metrics")
	if err != nil {
		return -1
	}
	return metricValue(m, fmt.Sprintf(`kubelet_pod_worker_duration_seconds_count{operation_type=%q}`, op))
}

// readyCondition returns the node's Ready condition.
func readyCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// deleteAndDrain deletes the API pods named names (with their grace
// period) and waits until the runtime is empty, no containerd mount is
// left and no pod is bound to node in the API.
func deleteAndDrain(ctx context.Context, t *testing.T, admin kubernetes.Interface, rt *remote.Client, c *containerdtest.Containerd, node string, names []string) {
	t.Helper()
	for _, name := range names {
		if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "containerd empty and the node's pods gone from the API", func() bool {
		pods, err := nodePods(ctx, admin, node)
		return err == nil && len(pods) == 0 && runtimeEmpty(rt)
	})
	testenv.EventuallyErr(t, 10*time.Second, 100*time.Millisecond, "no mount of containerd's left", func() (bool, error) {
		if m := c.Mounts(); len(m) > 0 {
			return false, fmt.Errorf("mounted: %s", strings.Join(m, " "))
		}
		return true, nil
	})
}

// runtimeDownAfter is the agent's --runtime-down-after in the containerd
// restart test: the node reports the runtime down this long after its last
// good status check (kubelet's 30s would only make the test longer).
const runtimeDownAfter = 5 * time.Second

// containerd is stopped under an agent that runs 10 pods, once with
// SIGTERM (a clean shutdown, as for an upgrade) and once with SIGKILL (a
// crash), and kept down until the node reports it; then it is started
// again. The node goes NotReady with the runtime's reason and message and
// back to Ready; the agent's CRI client reconnects by itself (the same
// agent process, one connection logged); no container is recreated (the
// same sandboxes and containers in the runtime, the same containerID and
// restartCount in the API) even after every pod was synced again; and no
// pod update during the faults reports a pod Failed, a container
// terminated or a restart.
func TestAgentSurvivesContainerdRestart(t *testing.T) {
	cp := controlplane.Need(t, cp)
	onBothRuntimes(t, func(t *testing.T, c *containerdtest.Containerd, suffix string) { containerdRestart(t, cp, c, suffix) })
}

func containerdRestart(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()
	node := "e2e-fault-containerd" + suffix
	p := startAgent(t, node, append(podArgs(t, c, t.TempDir()),
		"--node-lease-duration-seconds=4",
		"--node-status-update-frequency=2s",
		// Every pod is synced again every 5s, so that after containerd
		// is back each pod is synced on the runtime's new state.
		"--sync-frequency=5s",
		fmt.Sprintf("--runtime-down-after=%v", runtimeDownAfter),
	)...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	names := createPods(ctx, t, admin, c, node, "crd"+suffix, 10)
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "10 pods Running and Ready", func() bool {
		return runningReady(ctx, admin, node, names)
	})
	t.Logf("10 pods Running and Ready %v after the agent started", time.Since(p.started).Round(time.Millisecond))
	uids := map[string]types.UID{}
	pods, err := nodePods(ctx, admin, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		uids[pod.Name] = pod.UID
	}
	criBefore := criState(ctx, t, rt)
	checkOnePerPod(t, criBefore, uids)
	apiBefore := apiContainers(ctx, t, admin, node)
	rec := newPodRecorder(t, admin, node)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(strings.ToUpper(unix(sig)), func(t *testing.T) {
			down := time.Now()
			if err := c.Kill(ctx, sig); err != nil {
				t.Fatal(err)
			}
			restarted := false
			defer func() {
				// The package's other tests need containerd.
				if !restarted {
					if err := c.Restart(context.Background()); err != nil {
						t.Errorf("restarting containerd after a failure: %v", err)
					}
				}
			}()
			notReady := waitNode(ctx, t, admin, node, down, runtimeDownAfter+time.Minute, func(n *corev1.Node) bool {
				return readyCondition(n).Status == corev1.ConditionFalse
			})
			t.Logf("node NotReady %v after containerd was stopped: %s", time.Since(down).Round(time.Millisecond), describeNode(notReady))
			if c := readyCondition(notReady); c.Reason != "KubeletNotReady" || c.Message != "container runtime is down" {
				t.Errorf("Ready condition while containerd is down: reason %q, message %q; want KubeletNotReady, %q",
					c.Reason, c.Message, "container runtime is down")
			}
			up := time.Now()
			restarted = true
			if err := c.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			waitNode(ctx, t, admin, node, up, time.Minute, func(n *corev1.Node) bool {
				c := readyCondition(n)
				return c.Status == corev1.ConditionTrue && c.Reason == "KubeletReady"
			})
			t.Logf("node Ready %v after containerd was started again", time.Since(up).Round(time.Millisecond))

			// Two rounds of resyncs of the 10 pods on the runtime's new
			// state: a sync that did not adopt would have acted by then.
			syncs := syncCount(p, "sync")
			testenv.Eventually(t, time.Minute, 200*time.Millisecond, "20 more pod syncs after containerd is back", func() bool {
				return syncCount(p, "sync") >= syncs+20
			})
			select {
			case <-p.done:
				t.Fatalf("the agent exited: %v", p.waitErr)
			default:
			}
			if n := strings.Count(p.log.String(), "Connected to the container runtime"); n != 1 {
				t.Errorf("the agent logged %d connections to the runtime; want the first one only (the CRI client reconnects by itself)", n)
			}
			if after := criState(ctx, t, rt); !maps.EqualFunc(after, criBefore, func(a, b *criPod) bool {
				return a.name == b.name && slices.Equal(a.sandboxes, b.sandboxes) && slices.Equal(a.containers, b.containers)
			}) {
				t.Errorf("runtime after containerd was restarted:%s\nwant as before:%s", describeCRI(after), describeCRI(criBefore))
			}
			if after := apiContainers(ctx, t, admin, node); !maps.Equal(after, apiBefore) {
				t.Errorf("container statuses in the API after containerd was restarted:\n%v\nwant as before:\n%v", after, apiBefore)
			}
			if !runningReady(ctx, admin, node, names) {
				t.Errorf("not every pod is Running and Ready after containerd was restarted")
			}
			rec.check(t)
		})
		if t.Failed() {
			break
		}
	}
	rec.Stop()
	deleteAndDrain(ctx, t, admin, rt, c, node, names)
	p.stop(t)
}

// unix names a signal as kill(1) does.
func unix(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "sigterm"
	case syscall.SIGKILL:
		return "sigkill"
	}
	return sig.String()
}

// kill SIGKILLs the agent's process group and waits until it has exited.
func (p *agentProc) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// mirrorPod returns the mirror pod named name, or nil when there is none.
func mirrorPod(ctx context.Context, t *testing.T, admin kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	got, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[corev1.MirrorPodAnnotationKey] == "" {
		t.Fatalf("%s is not a mirror pod: %v", name, got.Annotations)
	}
	return got
}

// runningOf returns the IDs of the running containers of the pods named in
// names, as a set.
func runningOf(t *testing.T, rt *remote.Client, names []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, id := range runningContainers(t, rt, names...) {
		out[id] = true
	}
	return out
}

// The agent is SIGKILLed while it starts 20 API pods (some running, some
// not yet) next to a static pod, and started again on the same root
// directory; and again while it deletes the 20. After each restart: the
// runtime holds exactly one sandbox, ready, and one running container per
// pod that should run and nothing else (no duplicate, no orphan once the
// deletion completes); the containers that ran when it was killed run on
// (restartCount 0 everywhere); the static pod keeps its UID and its mirror
// pod is the same object (same UID; no pod is seen with a second UID);
// the lease is renewed and the node's status written again by the new
// agent; and no pod update reports a Running pod Pending again, a container
// terminated or a pod Failed while the pods should run. On either containerd,
// before each restart, the tasks containerd leaks when a start of the
// killed agent was cut short (containerd/containerd#11037) are deleted
// through containerd's own API once no such call is in flight
// (reapLeakedTasks), and the test fails at once if a task that never
// started is left.
func TestAgentKilledMidway(t *testing.T) {
	cp := controlplane.Need(t, cp)
	onBothRuntimes(t, func(t *testing.T, c *containerdtest.Containerd, suffix string) { killedMidway(t, cp, c, suffix) })
}

func killedMidway(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()
	node := "e2e-fault-kill" + suffix
	manifests := t.TempDir()
	if err := os.WriteFile(filepath.Join(manifests, "static.yaml"), []byte(staticManifest("static-kill"+suffix, c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same flags, and so the same --root-dir, for every agent.
	args := append(podArgs(t, c, manifests), "--node-lease-duration-seconds=4", "--node-status-update-frequency=2s")
	calls := followCRICalls(t, c)
	p := startAgent(t, node, args...)
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), node, metav1.DeleteOptions{})
	})
	mirrorName := "static-kill" + suffix + "-" + node
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the static pod's mirror pod Running", func() bool {
		m := mirrorPod(ctx, t, admin, mirrorName)
		return m != nil && m.Status.Phase == corev1.PodRunning && podReady(m)
	})
	mirror := mirrorPod(ctx, t, admin, mirrorName)
	staticUID := types.UID(mirror.Annotations[corev1.MirrorPodAnnotationKey])
	rec := newPodRecorder(t, admin, node)

	// Kill the agent while it starts the 20.
	names := createPods(ctx, t, admin, c, node, "kill"+suffix, 20)
	var atKill map[string]bool
	testenv.Eventually(t, 2*time.Minute, 10*time.Millisecond, "some but not all of the 20 pods' containers running", func() bool {
		atKill = runningOf(t, rt, names)
		if len(atKill) == len(names) {
			t.Fatalf("all 20 pods were running before the agent could be killed mid-way")
		}
		return len(atKill) > 0
	})
	p.kill(t)
	t.Logf("agent killed with %d of 20 pods' containers running; runtime:%s", len(atKill), describeCRI(criState(ctx, t, rt)))
	reapLeakedTasks(ctx, t, c, rt, calls)
	restarted := func() *agentProc {
		t.Helper()
		p := startAgent(t, node, args...)
		testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the new agent serving its metrics", func() bool {
			_, err := p.fetch("/metrics")
			return err == nil
		})
		// The lease and the node's status carry on under the new agent
		// (times in the API have whole seconds).
		since := p.started.Truncate(time.Second)
		renewals := waitLeaseRenewals(ctx, t, admin, node, 2, 30*time.Second)
		if last := renewals[len(renewals)-1].Spec.RenewTime; last.Time.Before(since) {
			t.Errorf("lease renewTime %v is before the new agent started (%v)", last, since)
		}
		waitNode(ctx, t, admin, node, p.started, time.Minute, func(n *corev1.Node) bool {
			c := readyCondition(n)
			return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since)
		})
		return p
	}
	p = restarted()
	uids := map[string]types.UID{mirrorName: staticUID}
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the 20 pods and the mirror pod Running and Ready", func() bool {
		return runningReady(ctx, admin, node, append(slices.Clone(names), mirrorName))
	})
	pods, err := nodePods(ctx, admin, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		if pod.Name != mirrorName {
			uids[pod.Name] = pod.UID
		}
	}
	// Every pod synced once by the new agent (its first sync of a pod
	// counts as "create"): a duplicate would have been made by then.
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the new agent synced the 21 pods", func() bool {
		return syncCount(p, "create") >= 21
	})
	waitOnePerPod(ctx, t, rt, uids)
	after := runningOf(t, rt, names)
	for id := range atKill {
		if !after[id] {
			t.Errorf("container %s, running when the agent was killed, no longer runs", id)
		}
	}
	for name, s := range apiContainers(ctx, t, admin, node) {
		if !strings.HasSuffix(s, "/0") {
			t.Errorf("pod %s: containers %s; want restartCount 0", name, s)
		}
	}
	if m := mirrorPod(ctx, t, admin, mirrorName); m == nil || m.UID != mirror.UID {
		t.Errorf("mirror pod after the restart: %v; want the same object, uid %s", m, mirror.UID)
	}
	rec.check(t)
	rec.Stop()
	if t.Failed() {
		return
	}

	// Kill the agent while it deletes the 20.
	staticBefore := criState(ctx, t, rt)[string(staticUID)]
	deleted := time.Now()
	for _, name := range names {
		if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var left int
	testenv.Eventually(t, 2*time.Minute, 10*time.Millisecond, "some but not all of the 20 pods' containers stopped", func() bool {
		left = len(runningOf(t, rt, names))
		if left == 0 {
			t.Fatalf("all 20 pods' containers stopped before the agent could be killed mid-way")
		}
		return left < len(names)
	})
	p.kill(t)
	t.Logf("agent killed %v after the deletions, with %d of 20 pods' containers running; runtime:%s",
		time.Since(deleted).Round(time.Millisecond), left, describeCRI(criState(ctx, t, rt)))
	reapLeakedTasks(ctx, t, c, rt, calls)
	p = restarted()
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the 20 pods gone from the API and the runtime", func() bool {
		pods, err := nodePods(ctx, admin, node)
		return err == nil && len(pods) == 1 && pods[0].Name == mirrorName && len(criState(ctx, t, rt)) == 1
	})
	state := criState(ctx, t, rt)
	checkOnePerPod(t, state, map[string]types.UID{mirrorName: staticUID})
	if s := state[string(staticUID)]; s == nil || !slices.Equal(s.sandboxes, staticBefore.sandboxes) || !slices.Equal(s.containers, staticBefore.containers) {
		t.Errorf("the static pod in the runtime:%s\nwant as before:%s", describeCRI(state), describeCRI(map[string]*criPod{string(staticUID): staticBefore}))
	}
	if m := mirrorPod(ctx, t, admin, mirrorName); m == nil || m.UID != mirror.UID {
		t.Errorf("mirror pod after the second restart: %v; want the same object, uid %s", m, mirror.UID)
	}

	if err := os.Remove(filepath.Join(manifests, "static.yaml")); err != nil {
		t.Fatal(err)
	}
	deleteAndDrain(ctx, t, admin, rt, c, node, nil)
	p.stop(t)
}

// apiServerDownFor is how long the API server stays down in
// TestAgentAPIServerDown.
const apiServerDownFor = 60 * time.Second

// The API server is stopped for apiServerDownFor under an agent that runs
// three API pods and a static pod; meanwhile that static pod's manifest is
// deleted and another one written. While the API server is down the pods
// run on (the same containers) and the static changes reach the runtime:
// the removed pod's sandbox and container are gone, the new one runs. Once
// it is back, the status catches up: the new static pod's mirror pod
// appears and goes Running, the removed one's mirror pod is deleted, the
// lease is renewed and the node is Ready; no pod is duplicated, and no pod
// update reports a Running pod Pending again, a running container
// terminated or replaced, or a pod Failed.
//
// It runs one agent on each containerd, and both through the same outage.
func TestAgentAPIServerDown(t *testing.T) {
	cp := controlplane.Need(t, cp)
	o := &apiOutage{cp: cp, waiting: len(bothRuntimes), down: make(chan struct{})}
	t.Cleanup(func() {
		// The package's other tests need the API server.
		if err := o.end(); err != nil {
			t.Errorf("starting the API server again: %v", err)
		}
	})
	for _, r := range bothRuntimes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			var once sync.Once
			arrive := func(ready bool) { once.Do(func() { o.arrive(ready) }) }
			defer arrive(false) // a test that ends early does not hold up the outage
			apiServerDown(t, cp, r.need(t), r.suffix, o, arrive)
		})
	}
}

// apiOutage is one outage of the test control plane's API server that
// parallel tests share: it is stopped once each of them is ready for it or
// has ended, and started again by the first call of end.
type apiOutage struct {
	cp *controlplane.ControlPlane

	mu      sync.Mutex
	waiting int           // tests that have not arrived
	ready   bool          // a test arrived ready
	down    chan struct{} // closed once every test arrived
	at      time.Time     // when the API server was stopped
	err     error         // stopping it
	stopped bool

	endOnce sync.Once
	endErr  error
}

// arrive tells that one test is ready for the outage (or, not ready, has
// ended); the last to arrive stops the API server if one was ready.
func (o *apiOutage) arrive(ready bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waiting--
	o.ready = o.ready || ready
	if o.waiting > 0 {
		return
	}
	if o.ready {
		o.at = time.Now()
		o.err = o.cp.StopAPIServer()
		o.stopped = true
	}
	close(o.down)
}

// wait waits until the API server was stopped, and returns when.
func (o *apiOutage) wait(ctx context.Context) (time.Time, error) {
	select {
	case <-o.down:
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at, o.err
}

// end starts the API server again if it was stopped; only the first call
// does anything.
func (o *apiOutage) end() error {
	o.endOnce.Do(func() {
		o.mu.Lock()
		stopped := o.stopped
		o.mu.Unlock()
		if stopped {
			o.endErr = o.cp.StartAPIServer()
		}
	})
	return o.endErr
}

func apiServerDown(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string, o *apiOutage, arrive func(ready bool)) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()
	node := "e2e-fault-apiserver" + suffix
	manifests := t.TempDir()
	oldFile, newFile := filepath.Join(manifests, "old.yaml"), filepath.Join(manifests, "new.yaml")
	if err := os.WriteFile(oldFile, []byte(staticManifest("static-old"+suffix, c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, node, append(podArgs(t, c, manifests), "--node-lease-duration-seconds=4", "--node-status-update-frequency=2s")...)
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), node, metav1.DeleteOptions{})
	})
	names := createPods(ctx, t, admin, c, node, "outage"+suffix, 3)
	oldMirror, newMirror := "static-old"+suffix+"-"+node, "static-new"+suffix+"-"+node
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "3 API pods and the static pod's mirror pod Running and Ready", func() bool {
		return runningReady(ctx, admin, node, append(slices.Clone(names), oldMirror))
	})
	t.Logf("pods Running and Ready %v after the agent started", time.Since(p.started).Round(time.Millisecond))
	oldUID := types.UID(mirrorPod(ctx, t, admin, oldMirror).Annotations[corev1.MirrorPodAnnotationKey])
	apiRunning := runningOf(t, rt, names)
	if len(apiRunning) != 3 {
		t.Fatalf("%d running containers of the 3 API pods", len(apiRunning))
	}
	apiBefore := apiContainers(ctx, t, admin, node)
	delete(apiBefore, oldMirror)
	rec := newPodRecorder(t, admin, node)
	rec.Ignore("default/" + oldMirror)

	arrive(true)
	down, err := o.wait(ctx)
	if err != nil {
		t.Fatalf("stopping the API server: %v", err)
	}
	t.Logf("API server stopped in %v", time.Since(down).Round(time.Millisecond))
	if err := os.Remove(oldFile); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newFile, []byte(staticManifest("static-new"+suffix, c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The static changes reach the runtime with the API server down.
	outage, outageCancel := context.WithDeadline(ctx, down.Add(apiServerDownFor))
	defer outageCancel()
	var newUID string
	for {
		state := criState(ctx, t, rt)
		newUID = ""
		for uid, p := range state {
			if p.name == newMirror && len(p.containers) == 1 && strings.Contains(p.containers[0], " CONTAINER_RUNNING ") {
				newUID = uid
			}
		}
		if state[string(oldUID)] == nil && newUID != "" {
			t.Logf("static changes applied in the runtime %v after the API server stopped", time.Since(down).Round(time.Millisecond))
			break
		}
		if outage.Err() != nil {
			t.Fatalf("static changes not applied in the runtime during the %v outage:%s", apiServerDownFor, describeCRI(state))
		}
		pause(outage)
	}
	<-outage.Done()
	if got := runningOf(t, rt, names); !maps.Equal(got, apiRunning) {
		t.Errorf("API pods' running containers at the end of the outage %v; want %v", got, apiRunning)
	}
	if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the agent is gone: %v", err)
	}
	back := time.Now()
	if err := o.end(); err != nil {
		t.Fatalf("starting the API server again: %v", err)
	}
	t.Logf("API server down %v, ready again %v later", back.Sub(down).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))

	// The status catches up.
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the new static pod's mirror pod Running and Ready, the old one's deleted", func() bool {
		pods, err := nodePods(ctx, admin, node)
		if err != nil {
			return false
		}
		var got []string
		for _, p := range pods {
			got = append(got, p.Name)
		}
		slices.Sort(got)
		want := append(slices.Clone(names), newMirror)
		slices.Sort(want)
		return slices.Equal(got, want) && runningReady(ctx, admin, node, want)
	})
	t.Logf("status caught up %v after the API server was back", time.Since(back).Round(time.Millisecond))
	if m := mirrorPod(ctx, t, admin, newMirror); m.Annotations[corev1.MirrorPodAnnotationKey] != newUID {
		t.Errorf("mirror pod %s is of static pod %s; want %s", newMirror, m.Annotations[corev1.MirrorPodAnnotationKey], newUID)
	}
	renewals := waitLeaseRenewals(ctx, t, admin, node, 2, 30*time.Second)
	if last := renewals[len(renewals)-1].Spec.RenewTime; last.Time.Before(back.Truncate(time.Second)) {
		t.Errorf("lease renewTime %v is from before the API server was back (%v)", last, back)
	}
	waitNode(ctx, t, admin, node, time.Now(), time.Minute, func(n *corev1.Node) bool {
		return readyCondition(n).Status == corev1.ConditionTrue
	})
	apiAfter := apiContainers(ctx, t, admin, node)
	delete(apiAfter, newMirror)
	if !maps.Equal(apiAfter, apiBefore) {
		t.Errorf("API pods' container statuses after the outage:\n%v\nwant as before:\n%v", apiAfter, apiBefore)
	}
	uids := map[string]types.UID{newMirror: types.UID(newUID)}
	pods, err := nodePods(ctx, admin, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		if pod.Name != newMirror {
			uids[pod.Name] = pod.UID
		}
	}
	waitOnePerPod(ctx, t, rt, uids)
	if got := runningOf(t, rt, names); !maps.Equal(got, apiRunning) {
		t.Errorf("API pods' running containers after the outage %v; want %v", got, apiRunning)
	}
	// The watch lists again after its own back-off: wait until it saw
	// the new mirror pod, so that it has seen the pods as they are now.
	// client-go's reflector backs off up to 30s with a jitter of as much
	// again after a minute of failures, so its next list may come a
	// minute after the API server is back, and the list itself takes
	// longer on a loaded machine: a minute was not always enough.
	testenv.Eventually(t, 150*time.Second, 200*time.Millisecond, "the pod watch seeing the new mirror pod", func() bool {
		return len(rec.uidsOf("default/"+newMirror)) > 0
	})
	rec.check(t)
	rec.Stop()

	if err := os.Remove(newFile); err != nil {
		t.Fatal(err)
	}
	drain := time.Now()
	deleteAndDrain(ctx, t, admin, rt, c, node, names)
	t.Logf("pods removed in %v", time.Since(drain).Round(time.Millisecond))
	p.stop(t)
}
