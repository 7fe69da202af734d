package volume

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// engineFixture runs a podsync Engine on the in-memory runtime with the
// fixture's Manager as the CRI syncer's PodData, stepped by hand on the
// fake clock.
type engineFixture struct {
	*fixture
	rt  *runtimetest.Runtime
	eng *podsync.Engine
}

func newEngineFixture(t *testing.T) *engineFixture {
	f := newFixture(t, nil)
	rt := runtimetest.New(runtimetest.Options{Clock: f.clock})
	syncer, err := cri.New(cri.Options{Runtime: rt, Clock: f.clock, PodLogRoot: filepath.Join(f.root, "logs"), PodRoot: filepath.Join(f.root, "pods"),
		ResolvConf: "-", HostIPs: []string{"192.0.2.10"}, PodData: f.m, Recorder: f.rec})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := podsync.New(podsync.Options{Syncer: syncer, Clock: f.clock, HostIPs: []string{"192.0.2.10"}})
	if err != nil {
		t.Fatal(err)
	}
	return &engineFixture{fixture: f, rt: rt, eng: eng}
}

func (e *engineFixture) step() corev1.PodStatus {
	e.t.Helper()
	for range 2 {
		if _, err := e.eng.SyncOnce(context.Background()); err != nil {
			e.t.Fatal(err)
		}
	}
	s, _ := e.eng.PodStatus("uid-web")
	return s
}

func waiting(s corev1.PodStatus) string {
	if len(s.ContainerStatuses) == 0 {
		return "no status"
	}
	cs := s.ContainerStatuses[0]
	switch {
	case cs.State.Waiting != nil:
		return cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
	case cs.State.Running != nil:
		return "running"
	}
	return "terminated"
}

func (e *engineFixture) changedFor(uid types.UID, from int) bool {
	for _, u := range e.changedPods()[from:] {
		if u == uid {
			return true
		}
	}
	return false
}

// A container whose env needs a ConfigMap that does not exist waits in
// CreateContainerConfigError with the kubelet's event, and starts once the
// ConfigMap appears (OnChange, which an agent wires to Engine.Trigger).
func TestEngineEnvWaitsForConfigMap(t *testing.T) {
	e := newEngineFixture(t)
	pod := newPod("web")
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Image = runtimetest.BusyboxImage
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "k"}}}}
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.step()
	if got := waiting(s); got != `CreateContainerConfigError: configmap "later" not found` {
		t.Errorf("waiting %q", got)
	}
	if ev := e.events(); !hasEvent(ev, "Warning Failed", `Error: configmap "later" not found`) {
		t.Errorf("events %v", ev)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "watch in place", func() bool { return e.api.watching("configmaps") > 0 })
	before := len(e.changedPods())
	if _, err := e.fake.CoreV1().ConfigMaps("ns").Create(context.Background(), configMap("later", map[string]string{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "OnChange for the pod", func() bool { return e.changedFor(pod.UID, before) })
	e.eng.Trigger(pod.UID)
	if got := waiting(e.step()); got != "running" {
		t.Errorf("after the ConfigMap appeared: %q", got)
	}
}

// A pod whose Secret volume cannot be set up runs nothing (no sandbox),
// reports ContainerCreating and a FailedMount event; other pods run.
func TestEngineVolumeWaitsForSecret(t *testing.T) {
	needRoot(t)
	e := newEngineFixture(t)
	pod := newPod("web", secretVol("s", "later"))
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Image = runtimetest.BusyboxImage
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/s"}}
	other := newPod("other")
	other.Spec.HostNetwork = true
	other.Spec.Containers[0].Image = runtimetest.BusyboxImage
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod, other}})
	s := e.step()
	if got := waiting(s); !strings.HasPrefix(got, "ContainerCreating") {
		t.Errorf("waiting %q", got)
	}
	if ev := e.events(); !hasEvent(ev, "Warning FailedMount", `MountVolume.SetUp failed for volume "s" : secret "later" not found`) {
		t.Errorf("events %v", ev)
	}
	sbs, _ := e.rt.ListPodSandbox(context.Background(), nil)
	if len(sbs) != 1 || sbs[0].Metadata.Name != "other" {
		t.Errorf("sandboxes %v: want only the other pod's", sbs)
	}
	if s, _ := e.eng.PodStatus(other.UID); waiting(s) != "running" {
		t.Errorf("other pod: %q", waiting(s))
	}
	before := len(e.changedPods())
	if _, err := e.fake.CoreV1().Secrets("ns").Create(context.Background(), secret("later", map[string]string{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, waitTimeout, 2*time.Millisecond, "OnChange for the pod", func() bool { return e.changedFor(pod.UID, before) })
	e.eng.Trigger(pod.UID)
	if got := waiting(e.step()); got != "running" {
		t.Errorf("after the Secret appeared: %q", got)
	}
	// Removal tears the pod directory down through the Manager.
	del := pod.DeepCopy()
	now := metav1.NewTime(e.clock.Now())
	del.DeletionTimestamp = &now
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpDelete, Pods: []*corev1.Pod{del}})
	for range 5 {
		e.step()
	}
	if mps, _ := mountsUnder(e.root); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
	if n := e.m.Watches(); n != 0 {
		t.Errorf("%d watches after the pod terminated", n)
	}
}
