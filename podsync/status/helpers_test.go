package status_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/status"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const nodeName = "node-a"

// apiPod is a pod bound to the node as the API source hands it over.
func apiPod(name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, UID: uid,
			Annotations: map[string]string{podsource.ConfigSourceAnnotation: podsource.APISource},
		},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
}

// staticPod is a file pod and mirror its mirror pod in the API.
func staticPod(name string) (static, mirror *corev1.Pod) {
	static = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, UID: "static-hash",
			Annotations: map[string]string{
				podsource.ConfigSourceAnnotation: podsource.FileSource,
				podsource.ConfigHashAnnotation:   "static-hash",
			},
		},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
	}
	mirror = static.DeepCopy()
	mirror.UID = "mirror-uid"
	mirror.Annotations = map[string]string{
		podsource.ConfigSourceAnnotation: podsource.FileSource,
		podsource.ConfigHashAnnotation:   "static-hash",
		podsource.ConfigMirrorAnnotation: "static-hash",
	}
	mirror.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return static, mirror
}

func cond(t corev1.PodConditionType, ok bool) corev1.PodCondition {
	s := corev1.ConditionFalse
	if ok {
		s = corev1.ConditionTrue
	}
	return corev1.PodCondition{Type: t, Status: s}
}

// Statuses of one pod's lifecycle, as a node generates them.
func pendingStatus() corev1.PodStatus {
	return corev1.PodStatus{
		Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers, false), cond(corev1.PodInitialized, true),
			cond(corev1.PodReady, false), cond(corev1.ContainersReady, false), cond(corev1.PodScheduled, true),
		},
		HostIP:    "10.0.0.1",
		HostIPs:   []corev1.HostIP{{IP: "10.0.0.1"}},
		StartTime: &metav1.Time{Time: t0},
		QOSClass:  corev1.PodQOSBestEffort,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "registry.example/app:1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}},
	}
}

func runningStatus(ready bool) corev1.PodStatus {
	s := pendingStatus()
	s.Phase = corev1.PodRunning
	s.PodIP, s.PodIPs = "10.244.0.5", []corev1.PodIP{{IP: "10.244.0.5"}}
	s.Conditions[0] = cond(corev1.PodReadyToStartContainers, true)
	s.Conditions[2] = cond(corev1.PodReady, ready)
	s.Conditions[3] = cond(corev1.ContainersReady, ready)
	started := true
	s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: t0.Add(time.Second)}}}
	s.ContainerStatuses[0].ContainerID = "containerd://0123456789abcdef"
	s.ContainerStatuses[0].ImageID = "registry.example/app@sha256:00"
	s.ContainerStatuses[0].Started = &started
	s.ContainerStatuses[0].Ready = ready
	return s
}

func succeededStatus() corev1.PodStatus {
	s := runningStatus(false)
	s.Phase = corev1.PodSucceeded
	s.Conditions[0] = cond(corev1.PodReadyToStartContainers, false)
	started := false
	s.ContainerStatuses[0].Started = &started
	s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", ContainerID: "containerd://0123456789abcdef",
		StartedAt: metav1.Time{Time: t0.Add(time.Second)}, FinishedAt: metav1.Time{Time: t0.Add(time.Minute)},
	}}
	return s
}

type env struct {
	t      *testing.T
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	reg    *prometheus.Registry
	w      *status.Writer
	wait   time.Duration // what the last SyncOnce returned
}

func newEnv(t *testing.T, objs ...*corev1.Pod) *env {
	t.Helper()
	client := fake.NewClientset()
	for _, p := range objs {
		if err := client.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	w, err := status.New(status.Options{Pods: func(ns string) status.PodClient { return client.CoreV1().Pods(ns) }, Clock: clk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, client: client, clock: clk, reg: reg, w: w}
}

// sync runs one SyncOnce and returns the actions it made.
func (e *env) sync() []clienttesting.Action {
	e.t.Helper()
	e.client.ClearActions()
	var err error
	if e.wait, err = e.w.SyncOnce(context.Background()); err != nil {
		e.t.Fatalf("SyncOnce: %v", err)
	}
	return e.client.Actions()
}

// succeededKept checks that the writer's status of pod name (uid) is
// Succeeded, as the API's copy said, that the next sync writes no phase,
// and that the API's copy is still Succeeded after it.
func (e *env) succeededKept(name string, uid types.UID) {
	e.t.Helper()
	if s, _ := e.w.Status(uid); s.Phase != corev1.PodSucceeded {
		e.t.Errorf("Status phase %q, want Succeeded from the API", s.Phase)
	}
	for _, a := range e.sync() {
		if st := patchOf(e.t, a)["status"].(map[string]any); st["phase"] != nil {
			e.t.Errorf("phase written: %v", st["phase"])
		}
	}
	if got := e.get(name).Status.Phase; got != corev1.PodSucceeded {
		e.t.Errorf("API phase %q", got)
	}
}

// syncErr runs one SyncOnce expecting an error.
func (e *env) syncErr() []clienttesting.Action {
	e.t.Helper()
	e.client.ClearActions()
	var err error
	if e.wait, err = e.w.SyncOnce(context.Background()); err == nil {
		e.t.Fatal("SyncOnce: no error")
	}
	return e.client.Actions()
}

func (e *env) get(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func verbs(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		v := a.GetVerb()
		if a.GetSubresource() != "" {
			v += "/" + a.GetSubresource()
		}
		out = append(out, v)
	}
	return out
}

// patchOf decodes the patch of a patch action.
func patchOf(t *testing.T, a clienttesting.Action) map[string]any {
	t.Helper()
	p, ok := a.(clienttesting.PatchAction)
	if !ok {
		t.Fatalf("action %s is not a patch", a.GetVerb())
	}
	if p.GetPatchType() != types.StrategicMergePatchType {
		t.Errorf("patch type %s", p.GetPatchType())
	}
	var m map[string]any
	if err := json.Unmarshal(p.GetPatch(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// requests gathers MetricRequests by verb.
func requests(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != status.MetricRequests {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "verb" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// deletingCopy is pod once its graceful deletion began.
func deletingCopy(pod *corev1.Pod) *corev1.Pod {
	d := pod.DeepCopy()
	now := metav1.NewTime(t0)
	grace := int64(30)
	d.DeletionTimestamp, d.DeletionGracePeriodSeconds = &now, &grace
	return d
}
