package cri

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/runtime/remote"
)

// ctrd and ctrd2 are the real containerds of the end-to-end tests and cp the control
// plane of the integration tests; nil in -short mode or when they are not
// available (the tests then skip).
var (
	ctrd, ctrd2 *containerdtest.Containerd // the host's 1.x; containerd 2
	cp          *controlplane.ControlPlane
)

func TestMain(m *testing.M) {
	os.Exit(containerdtest.MainBoth(func() int { return controlplane.Main(m, &cp) }, &ctrd, &ctrd2))
}

// e2e is one engine running on the real containerd.
type e2e struct {
	t      *testing.T
	c      *containerdtest.Containerd
	rt     *remote.Client
	cri    *Syncer
	eng    *podsync.Engine
	writer *recordingWriter
	cancel context.CancelFunc
	done   chan error
}

// startE2E starts an engine on c; mods change the syncer's options.
func startE2E(t *testing.T, c *containerdtest.Containerd, podRoot string, mods ...func(*Options)) *e2e {
	t.Helper()
	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint, ConnectionTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := &e2e{t: t, c: c, rt: rt, writer: &recordingWriter{}, done: make(chan error, 1)}
	o := Options{Runtime: rt, PodLogRoot: c.PodLogRoot, PodRoot: podRoot, CgroupRoot: c.CgroupRoot, CgroupsPerQOS: true,
		ResolvConf: "-", HostIPs: []string{"127.0.0.1"}, CrashLoopInitial: time.Second, CrashLoopMax: 4 * time.Second}
	for _, mod := range mods {
		mod(&o)
	}
	e.cri, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	// Runtime pods no source knows are orphans only once the API source's
	// first set came (HandleUpdate with Source APISource): an agent
	// started on pods a stopped one ran adopts them, whichever of its
	// first relist and its first update comes first.
	e.eng, err = podsync.New(podsync.Options{Syncer: e.cri, Writer: e.writer, HostIPs: []string{"127.0.0.1"}, RelistPeriod: 200 * time.Millisecond,
		Sources: []string{podsource.APISource}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- e.eng.Run(ctx) }()
	return e
}

// stop ends Run and closes the client.
func (e *e2e) stop() {
	e.cancel()
	if err := <-e.done; err != nil {
		e.t.Errorf("Run: %v", err)
	}
	_ = e.rt.Close()
}

func (e *e2e) waitStatus(pod *corev1.Pod, what string, cond func(s corev1.PodStatus) bool) corev1.PodStatus {
	e.t.Helper()
	var s corev1.PodStatus
	testenv.Eventually(e.t, 60*time.Second, 50*time.Millisecond, what, func() bool {
		s = e.writer.Last(pod.UID)
		return cond(s)
	})
	return s
}

// remove deletes the pod with grace 1s and waits until containerd holds
// nothing at all and the pod's log directory is gone.
func (e *e2e) remove(pod *corev1.Pod) {
	e.t.Helper()
	del := pod.DeepCopy()
	now := metav1.Now()
	grace := int64(1)
	del.DeletionTimestamp, del.DeletionGracePeriodSeconds = &now, &grace
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: []*corev1.Pod{del}})
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{del}})
	e.waitEmpty()
	testenv.Eventually(e.t, 30*time.Second, 50*time.Millisecond, "the pod's log directory removed", func() bool {
		_, err := os.Stat(podsync.PodLogDir(e.c.PodLogRoot, pod))
		return errors.Is(err, os.ErrNotExist)
	})
}

func (e *e2e) waitEmpty() {
	e.t.Helper()
	ctx := context.Background()
	testenv.Eventually(e.t, 60*time.Second, 50*time.Millisecond, "containerd empty", func() bool {
		sbs, err1 := e.rt.ListPodSandbox(ctx, nil)
		cs, err2 := e.rt.ListContainers(ctx, nil)
		return err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0
	})
}

func e2ePod(c *containerdtest.Containerd, name string, policy corev1.RestartPolicy, command ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	grace := int64(2)
	pod.Spec = corev1.PodSpec{HostNetwork: true, RestartPolicy: policy, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{Name: "app", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: command,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
	return pod
}

const sleeper = "trap 'exit 0' TERM; sleep 3600 & wait"

func e2eSetup(t *testing.T, c *containerdtest.Containerd) *e2e {
	t.Cleanup(leakcheck.Check(t)) // runs after e.stop

	e := startE2E(t, c, t.TempDir())
	t.Cleanup(e.stop)
	return e
}

func TestE2EPodRunning(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2EPodRunning) }

func testE2EPodRunning(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	pod := e2ePod(c, "running", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "Running and Ready", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodRunning && cond(s, corev1.PodReady) == "True/"
	})
	cs := s.ContainerStatuses[0]
	if cs.State.Running == nil || cs.ImageID == "" || cs.ContainerID[:13] != "containerd://" || s.PodIP != "127.0.0.1" || s.StartTime == nil {
		t.Errorf("status %+v", s)
	}
	if _, err := os.Stat(filepath.Join(podsync.PodLogDir(c.PodLogRoot, pod), "app", "0.log")); err != nil {
		t.Errorf("log file: %v", err)
	}
	e.remove(pod)
}

func TestE2ECrashLoop(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2ECrashLoop) }

func testE2ECrashLoop(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	pod := e2ePod(c, "crash", corev1.RestartPolicyAlways, "sh", "-c", "exit 1")
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	sawBackOff := false
	e.waitStatus(pod, "restartCount 3", func(s corev1.PodStatus) bool {
		if len(s.ContainerStatuses) == 0 {
			return false
		}
		cs := s.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == podsync.ReasonCrashLoopBackOff {
			sawBackOff = true
		}
		return cs.RestartCount >= 3
	})
	if !sawBackOff {
		t.Error("no CrashLoopBackOff status seen")
	}
	e.remove(pod)
}

func TestE2EInitContainerFirst(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2EInitContainerFirst)
}

func testE2EInitContainerFirst(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	pod := e2ePod(c, "init", corev1.RestartPolicyAlways, "sh", "-c", "test -f /data/ready && "+sleeper)
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	mount := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Containers[0].VolumeMounts = mount
	pod.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"sh", "-c", "sleep 0.3; touch /data/ready"}, VolumeMounts: mount}}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	ics := s.InitContainerStatuses[0]
	if ics.State.Terminated == nil || ics.State.Terminated.Reason != "Completed" || s.ContainerStatuses[0].RestartCount != 0 ||
		cond(s, corev1.PodInitialized) != "True/" {
		t.Errorf("status %+v", s)
	}
	e.remove(pod)
}

func TestE2EImageChangeRecreates(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2EImageChangeRecreates)
}

func testE2EImageChangeRecreates(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	pod := e2ePod(c, "image", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"sh", "-c", sleeper}})
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return cond(s, corev1.PodReady) == "True/" })
	appID, sideID := s.ContainerStatuses[0].ContainerID, s.ContainerStatuses[1].ContainerID
	upd := pod.DeepCopy()
	upd.Spec.Containers[0].Image, upd.Spec.Containers[0].Command = c.PauseImage, nil
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{upd}})
	s = e.waitStatus(pod, "app recreated", func(s corev1.PodStatus) bool {
		cs := s.ContainerStatuses[0]
		return cs.State.Running != nil && cs.ContainerID != appID && cond(s, corev1.PodReady) == "True/"
	})
	if s.ContainerStatuses[1].ContainerID != sideID {
		t.Errorf("side recreated too: %s → %s", sideID, s.ContainerStatuses[1].ContainerID)
	}
	e.remove(upd)
}

func TestE2EGracefulStopRunsPreStop(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2EGracefulStopRunsPreStop)
}

func testE2EGracefulStopRunsPreStop(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	dir := t.TempDir()
	dirType := corev1.HostPathDirectory
	pod := e2ePod(c, "prestop", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	pod.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo bye > /out/bye"}}}}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodRunning })
	e.remove(pod)
	if b, err := os.ReadFile(filepath.Join(dir, "bye")); err != nil || string(b) != "bye\n" {
		t.Errorf("preStop output %q, %v", b, err)
	}
	// The writer hears of the end after the runtime is clean.
	testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, "writer told the pod terminated and removed", func() bool {
		e.writer.Mu.Lock()
		defer e.writer.Mu.Unlock()
		return len(e.writer.Terminated) >= 1 && len(e.writer.Removed) >= 1
	})
	e.writer.Mu.Lock()
	defer e.writer.Mu.Unlock()
	if len(e.writer.Terminated) != 1 || len(e.writer.Removed) != 1 {
		t.Errorf("writer: terminated %v removed %v", e.writer.Terminated, e.writer.Removed)
	}
}

func TestE2ERestartNever(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2ERestartNever) }

func testE2ERestartNever(t *testing.T, c *containerdtest.Containerd) {
	e := e2eSetup(t, c)
	failed := e2ePod(c, "never-failed", corev1.RestartPolicyNever, "sh", "-c", "echo boom > /dev/termination-log; exit 3")
	ok := e2ePod(c, "never-ok", corev1.RestartPolicyNever, "true")
	logs := e2ePod(c, "never-logs", corev1.RestartPolicyNever, "sh", "-c", "echo first; echo last words; exit 4")
	logs.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{failed, ok, logs}})
	s := e.waitStatus(failed, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
	if ts := s.ContainerStatuses[0].State.Terminated; ts == nil || ts.ExitCode != 3 || ts.Reason != "Error" || ts.Message != "boom\n" {
		t.Errorf("failed pod: %+v", s.ContainerStatuses[0])
	}
	s = e.waitStatus(ok, "Succeeded", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })
	if ts := s.ContainerStatuses[0].State.Terminated; ts == nil || ts.ExitCode != 0 || ts.Reason != "Completed" {
		t.Errorf("succeeded pod: %+v", s.ContainerStatuses[0])
	}
	s = e.waitStatus(logs, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
	if ts := s.ContainerStatuses[0].State.Terminated; ts == nil || ts.ExitCode != 4 || ts.Message != "first\nlast words\n" {
		t.Errorf("message from logs: %+v", ts)
	}
	// Terminal pods are stopped and cleaned up without a deletion.
	e.waitEmpty()
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpRemove, Pods: []*corev1.Pod{failed, ok, logs}})
}

func TestE2EAdoption(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testE2EAdoption) }

func testE2EAdoption(t *testing.T, c *containerdtest.Containerd) {
	defer leakcheck.Check(t)()
	podRoot := t.TempDir()
	e := startE2E(t, c, podRoot)
	pod := e2ePod(c, "adopt", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "Running", func(s corev1.PodStatus) bool { return cond(s, corev1.PodReady) == "True/" })
	id := s.ContainerStatuses[0].ContainerID
	e.stop()

	e2 := startE2E(t, c, podRoot)
	defer e2.stop()
	e2.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource, Pods: []*corev1.Pod{pod}})
	s = e2.waitStatus(pod, "Ready again", func(s corev1.PodStatus) bool { return cond(s, corev1.PodReady) == "True/" })
	if got := s.ContainerStatuses[0].ContainerID; got != id || s.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("container %s restartCount %d, want %s adopted with 0", got, s.ContainerStatuses[0].RestartCount, id)
	}
	sbs, _ := e2.rt.ListPodSandbox(context.Background(), nil)
	if len(sbs) != 1 {
		t.Errorf("%d sandboxes, want 1", len(sbs))
	}
	e2.remove(pod)
}

// TestE2EOrphansKilledForeignKept: a sandbox with the kubelet's labels that
// no source knows is stopped and removed once the sources are ready; one
// without them is never touched.
func TestE2EOrphansKilledForeignKept(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2EOrphansKilledForeignKept)
}

func testE2EOrphansKilledForeignKept(t *testing.T, c *containerdtest.Containerd) {
	defer leakcheck.Check(t)()
	rt, err := remote.New(remote.Options{Endpoint: c.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(name string, labelled bool) string {
		cfg := c.SandboxConfig(name, "default", "uid-"+name)
		if !labelled {
			cfg.Labels = nil
		}
		sb, err := rt.RunPodSandbox(ctx, cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		cc := c.BusyboxContainer("app", "sh", "-c", sleeper)
		if labelled {
			cc.Labels[LabelPodUID] = "uid-" + name
		} else {
			cc.Labels = nil
		}
		id, err := rt.CreateContainer(ctx, sb, cc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	run("orphan", true)
	foreign := run("foreign", false)
	defer func() { _ = rt.RemovePodSandbox(ctx, foreign); _ = rt.Close() }()

	e := &e2e{t: t, c: c, rt: rt, writer: &recordingWriter{}, done: make(chan error, 1)}
	if e.cri, err = New(Options{Runtime: rt, PodLogRoot: c.PodLogRoot, PodRoot: t.TempDir(), CgroupRoot: c.CgroupRoot, ResolvConf: "-"}); err != nil {
		t.Fatal(err)
	}
	if e.eng, err = podsync.New(podsync.Options{Syncer: e.cri, Writer: e.writer, RelistPeriod: 100 * time.Millisecond, Sources: []string{podsource.APISource}}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	go func() { e.done <- e.eng.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-e.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	count := func() (sbs, ctrs int) {
		s, _ := rt.ListPodSandbox(ctx, nil)
		cs, _ := rt.ListContainers(ctx, nil)
		return len(s), len(cs)
	}
	// Before the sources are ready nothing is touched.
	testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "a relist", func() bool { return e.eng.State("uid-orphan") != nil })
	if s, cs := count(); s != 2 || cs != 2 {
		t.Fatalf("before sources are ready: %d sandboxes, %d containers", s, cs)
	}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Source: podsource.APISource}) // the API source's first (empty) set
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "orphan removed", func() bool {
		s, cs := count()
		return s == 1 && cs == 1
	})
	st, err := rt.PodSandboxStatus(ctx, foreign, false)
	if err != nil || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("foreign sandbox: %v %v", st, err)
	}
	if err := rt.RemovePodSandbox(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if s, cs := count(); s != 0 || cs != 0 {
		t.Errorf("left in containerd: %d sandboxes, %d containers", s, cs)
	}
}
