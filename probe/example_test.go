package probe_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/probe"
)

// Probing an HTTP endpoint once, as a kubelet readiness probe would.
func ExampleNewHandlers() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok from %s", r.Header.Get("User-Agent"))
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)

	p, err := probe.NewHandlers(probe.HandlerOptions{})
	if err != nil {
		panic(err)
	}
	spec := &corev1.Probe{
		TimeoutSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromInt32(int32(n)),
		}},
	}
	out := p.Probe(context.Background(), spec, probe.Target{PodIP: host})
	fmt.Println(out.Result, out.Message)
	// Output: Success ok from kube-probe/1.37
}

// Running the manager for one pod whose readiness probe is an HTTP GET,
// stepped by a fake clock: ready after the first probe, not ready after
// three failures (the default failureThreshold) 10s apart (the default
// periodSeconds).
func ExampleManager() {
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)

	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := probe.New(probe.Options{Clock: clk, NoStartJitter: true})
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "web",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(n)}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/ready", Port: intstr.FromString("http"),
			}}},
		}}},
	}
	m.AddPod(pod)
	// What the agent learns from the runtime: the pod IP and the container.
	m.SetPodStatus(pod.UID, &corev1.PodStatus{
		PodIP: host,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "web", ContainerID: "containerd://abc",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}},
		}},
	})

	ctx := context.Background()
	_, _ = m.SyncOnce(ctx) // in an agent: go m.Run(ctx)
	r, _ := m.Result(pod.UID, "web", probe.Readiness)
	fmt.Println("ready:", r)

	healthy.Store(false)
	for i := 1; i <= 3; i++ {
		clk.Step(10 * time.Second)
		_, _ = m.SyncOnce(ctx)
		r, _ := m.Result(pod.UID, "web", probe.Readiness)
		fmt.Printf("after failure %d: %v\n", i, r)
	}
	m.RemovePod(pod.UID)
	// Output:
	// ready: Success
	// after failure 1: Success
	// after failure 2: Success
	// after failure 3: Failure
}

// Subscribing to result changes while the manager runs on the real clock.
func ExampleManager_Subscribe() {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)

	// NoStartJitter: a manager just created would otherwise wait a random
	// part of the period before the first probe, as after an agent restart.
	m, _ := probe.New(probe.Options{NoStartJitter: true})
	ctx, cancel := context.WithCancel(context.Background())
	updates := m.Subscribe(ctx, 16)
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	m.AddPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-2"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web",
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
				Port: intstr.FromInt32(int32(n)),
			}}},
		}}},
		Status: corev1.PodStatus{PodIP: host, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "web", ContainerID: "containerd://def",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		}}},
	})
	u := <-updates // the initial result, then changes only
	fmt.Println(u.ContainerName, u.Type, u.Result)
	cancel()
	<-done
	// Output: web Liveness Success
}
