package podsynctest_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
	"github.com/nodekit/nodekit/probe"
)

// A simulated pod that starts after 2s, runs 5s and fails, under
// restartPolicy Never, driven step by step on a fake clock.
func Example() {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	backend := podsynctest.New(podsynctest.Options{
		Clock: clock,
		Stages: func(*corev1.Pod, string) podsynctest.Stages {
			return podsynctest.Stages{StartDelay: 2 * time.Second, RunFor: 5 * time.Second, ExitCode: 1}
		},
	})
	engine, err := podsync.New(podsync.Options{Syncer: backend, Clock: clock})
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "work", Image: "busybox"}}}}
	engine.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})

	show := func() {
		s, _ := engine.PodStatus(pod.UID)
		cs := s.ContainerStatuses[0]
		state := "running"
		switch {
		case cs.State.Waiting != nil:
			state = "waiting " + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated %s (%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		l, _ := engine.PodLifecycle(pod.UID)
		fmt.Printf("t=%v %s ip=%s %s ready=%v [%s]\n", clock.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), s.Phase, s.PodIP, state, cs.Ready, l)
	}
	for _, step := range []time.Duration{0, time.Second, time.Second, 5 * time.Second} {
		clock.Step(step)
		for range 3 {
			_, _ = engine.SyncOnce(ctx)
		}
		show()
	}
	// Output:
	// t=0s Pending ip=10.88.0.2 waiting ContainerCreating ready=false [Syncing]
	// t=1s Pending ip=10.88.0.2 waiting ContainerCreating ready=false [Syncing]
	// t=2s Running ip=10.88.0.2 running ready=true [Syncing]
	// t=7s Failed ip=10.88.0.2 terminated Error (1) ready=false [Done]
}

// Rules from a small file: web pods start in 2s, are ready 5s after they
// started and warm up their CPU; a pod's annotations make it a failing
// batch run. The prober here is told that both containers started at t=0.
func ExampleParseRules() {
	rules, err := podsynctest.ParseRules(strings.NewReader(`
rules:
- selector:
    matchLabels: {app: web}
  startDelay: 2s
  readinessDelay: 5s
  cpu: {from: 10m, to: 110m, over: 10s}
  memory: 64Mi
`))
	if err != nil {
		panic(err)
	}
	ready := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", UID: "uid-web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", ReadinessProbe: ready}}}}
	batch := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "batch-1", Namespace: "default", UID: "uid-batch",
		Annotations: map[string]string{podsynctest.AnnotationRunFor: "30s", podsynctest.AnnotationExitCode: "1"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox", ReadinessProbe: ready}}}}

	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakeClock(start)
	prober, err := rules.Prober(podsynctest.ProberOptions{Clock: clock,
		StartedAt: func(types.UID, string) (time.Time, bool) { return start, true }})
	if err != nil {
		panic(err)
	}
	for _, pod := range []*corev1.Pod{web, batch} {
		fmt.Printf("%s: %+v\n", pod.Name, rules.Stages(pod, "app"))
		for _, at := range []time.Duration{0, 5 * time.Second, 10 * time.Second} {
			clock.SetTime(start.Add(at))
			c := &pod.Spec.Containers[0]
			out := prober.Probe(context.Background(), c.ReadinessProbe, probe.Target{Pod: pod, Container: c, ContainerID: "sim://x"})
			cpu, mem := rules.Usage(pod, c.Name, at)
			fmt.Printf("  t=%-3v readiness %s, cpu %dm, memory %dMi\n", at, out.Result, cpu/1e6, mem>>20)
		}
	}
	// Output:
	// web-1: {StartDelay:2s RunFor:0s ExitCode:0 StopExitCode:137 FailCreate:}
	//   t=0s  readiness Failure, cpu 10m, memory 64Mi
	//   t=5s  readiness Success, cpu 60m, memory 64Mi
	//   t=10s readiness Success, cpu 110m, memory 64Mi
	// batch-1: {StartDelay:0s RunFor:30s ExitCode:1 StopExitCode:137 FailCreate:}
	//   t=0s  readiness Success, cpu 0m, memory 0Mi
	//   t=5s  readiness Success, cpu 0m, memory 0Mi
	//   t=10s readiness Success, cpu 0m, memory 0Mi
}
