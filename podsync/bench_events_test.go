package podsync_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkObserveMinute runs the engine (Run, fake clock) on the fake
// runtime with 100 pods of 3 running containers and steps one simulated
// minute per op, 1s at a time, waiting for each relist or health check:
// relist-only (the runtime answers Unimplemented) against container events
// (relist every 300s, the runtime's status every 1s). cpu-ms/min is the
// process's CPU (engine, CRI syncer and fake runtime) per simulated minute.
func BenchmarkObserveMinute(b *testing.B) {
	for _, events := range []bool{false, true} {
		name := "relist"
		if events {
			name = "events"
		}
		b.Run(name, func(b *testing.B) {
			clk := clocktesting.NewFakeClock(t0)
			rt := runtimetest.New(runtimetest.Options{Clock: clk, NoCallLog: true})
			rt.SetContainerEvents(events)
			cri, err := cri.New(cri.Options{Runtime: rt, Clock: clk, PodLogRoot: b.TempDir(), PodRoot: b.TempDir(), ResolvConf: "-"})
			if err != nil {
				b.Fatal(err)
			}
			rl := &countingRelister{Syncer: cri}
			writer := &recordingWriter{}
			eng, err := podsync.New(podsync.Options{Syncer: cri, Relister: rl, Writer: writer, Clock: clk, HostIPs: []string{"192.0.2.1"}, MaxParallel: 16})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- eng.Run(ctx) }()
			defer func() { cancel(); <-done }()
			// step moves the clock 1s and waits until the engine relisted
			// or checked the runtime at the new time.
			step := func() {
				clk.Step(time.Second)
				now := clk.Now()
				testenv.Eventually(b, time.Minute, 50*time.Microsecond, "a relist or check", func() bool {
					next, relistNow := podsync.NextObservation(eng)
					return next.After(now) && !relistNow
				})
			}
			var pods []*corev1.Pod
			for i := range 100 {
				p := busyboxPod(corev1.RestartPolicyAlways, "a", "b", "c")
				p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				pods = append(pods, p)
			}
			eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: pods})
			for deadline := time.Now().Add(time.Minute); ; {
				n := 0
				for _, p := range pods {
					if writer.Last(p.UID).Phase == corev1.PodRunning {
						n++
					}
				}
				if n == len(pods) {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d pods running", n, len(pods))
				}
				step()
			}
			// Settle: events in use (or not) and a quiet runtime.
			for range 3 {
				step()
			}
			relists, checks := rl.relists.Load(), rl.checks.Load()
			cpu := processCPU()
			b.ResetTimer()
			for range b.N {
				for range 60 {
					step()
				}
			}
			b.StopTimer()
			perMin := float64(b.N)
			b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/perMin, "cpu-ms/min")
			b.ReportMetric(float64(rl.relists.Load()-relists)/perMin, "relists/min")
			b.ReportMetric(float64(rl.checks.Load()-checks)/perMin, "checks/min")
			b.ReportMetric(0, "ns/op")
		})
	}
}
