package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

func BenchmarkHTTPProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	host, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	h := newHandlers(b, HandlerOptions{})
	spec, target := httpSpec("/healthz", port), Target{PodIP: host}
	b.ReportAllocs()
	for b.Loop() {
		if out := h.Probe(context.Background(), spec, target); out.Result != Success {
			b.Fatal(out)
		}
	}
}

func BenchmarkTCPProbe(b *testing.B) {
	port := acceptAndClose(b)
	h := newHandlers(b, HandlerOptions{})
	spec, target := tcpSpec(port), Target{PodIP: "127.0.0.1"}
	b.ReportAllocs()
	for b.Loop() {
		if out := h.Probe(context.Background(), spec, target); out.Result != Success {
			b.Fatal(out)
		}
	}
}

func BenchmarkGRPCProbe(b *testing.B) {
	hp, _ := grpcServers(b)
	h := newHandlers(b, HandlerOptions{})
	spec, target := grpcSpec(hp, nil), Target{PodIP: "127.0.0.1"}
	b.ReportAllocs()
	for b.Loop() {
		if out := h.Probe(context.Background(), spec, target); out.Result != Success {
			b.Fatal(out)
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkManager: 10,000 containers with a liveness and a readiness probe
// at the default period (10s), a prober that answers at once, a fake clock.
// One op is 10s of simulated time (20,000 probes). core/10s is the CPU time
// (user+system, all goroutines) of one op divided by 10s: the fraction of
// one core the manager's own work takes. (ns/op is wall time, which on a
// shared machine includes time other processes had the CPUs.)
func BenchmarkManager(b *testing.B) {
	for _, bc := range []struct {
		name  string
		steps int // steps per 10s
		opts  func(*Options)
	}{
		{"batched", 1, nil},
		{"spread-100ms-steps", 100, func(o *Options) { o.NoStartJitter = false }},
		{"metrics+subscriber", 1, func(o *Options) { o.Registerer = prometheus.NewRegistry() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			o := Options{
				Prober:        ProberFunc(func(context.Context, *corev1.Probe, Target) Outcome { return Outcome{Result: Success} }),
				Clock:         clk,
				NoStartJitter: true,
			}
			if bc.opts != nil {
				bc.opts(&o)
			}
			m, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if o.Registerer != nil {
				ch := m.Subscribe(ctx, 1024)
				go func() {
					for range ch {
					}
				}()
			}
			var ms0, ms1 goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&ms0)
			for i := range 10000 {
				uid := fmt.Sprintf("pod-%05d", i)
				c := corev1.Container{Name: "app",
					LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez"}}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz"}}},
				}
				pod := testPod(uid, c)
				m.AddPod(pod)
				m.SetPodStatus(types.UID(uid), &corev1.PodStatus{PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{
					Name: "app", ContainerID: "fake://" + uid, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				}}})
			}
			goruntime.GC()
			goruntime.ReadMemStats(&ms1)
			heapPerContainer := float64(ms1.HeapAlloc-ms0.HeapAlloc) / 10000
			step := 10 * time.Second / time.Duration(bc.steps)
			for range bc.steps { // warm up: initial results, first probes
				clk.Step(step)
				_, _ = m.SyncOnce(ctx)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				for range bc.steps {
					clk.Step(step)
					_, _ = m.SyncOnce(ctx)
				}
			}
			cpu := cpuTime() - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu)/float64(b.N)/float64(10*time.Second), "core/10s")
			b.ReportMetric(float64(cpu)/float64(b.N)/20000, "cpu-ns/probe")
			b.ReportMetric(heapPerContainer, "heapB/container")
		})
	}
}

// BenchmarkManagerRun: the same 10,000 containers × 2 probes under Run with
// the real clock. The start jitter spreads the probes over the period, so
// Run wakes for them one by one, about 2,000 times a second, as it would on a
// node. One op is one second of real time; core/10s is the CPU time of 10
// such seconds divided by 10s.
func BenchmarkManagerRun(b *testing.B) {
	m, err := New(Options{
		Prober: ProberFunc(func(context.Context, *corev1.Probe, Target) Outcome { return Outcome{Result: Success} }),
	})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		uid := fmt.Sprintf("pod-%05d", i)
		c := corev1.Container{Name: "app",
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez"}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz"}}},
		}
		m.AddPod(testPod(uid, c))
		m.SetPodStatus(types.UID(uid), &corev1.PodStatus{PodIP: "10.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: "fake://" + uid, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu)*10/float64(b.N)/float64(10*time.Second), "core/10s")
}

// BenchmarkGoroutinePerWorker is the design the manager did not take, for
// comparison with BenchmarkManagerRun: kubelet's shape, one goroutine with
// its own ticker per worker (20,000 of them, period 10s, started at random
// points of the period), each tick doing a trivially fast probe and taking
// a shared lock as a result cache would. One op is one second of real time.
func BenchmarkGoroutinePerWorker(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	results := make(map[int]Result, 20000)
	var wg sync.WaitGroup
	for i := range 20000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(10 * time.Second)))):
			case <-ctx.Done():
				return
			}
			t := time.NewTicker(10 * time.Second)
			defer t.Stop()
			for {
				mu.Lock()
				results[i] = Success
				mu.Unlock()
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	cancel()
	wg.Wait()
	b.ReportMetric(float64(cpu)*10/float64(b.N)/float64(10*time.Second), "core/10s")
}
