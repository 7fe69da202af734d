package nodestatus_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

// BenchmarkDefaultSetters measures one pass of the default setters for a
// simulated node: fake host facts, a fake runtime with 50 images.
//
//	steady:   the node already holds last pass's status (what a heartbeat
//	          loop that keeps its node does every period)
//	copy:     a deep copy of last pass's node first, then the pass (what a
//	          heartbeat that copies its cached node does)
//	copy-only: the deep copy alone, to tell the copy's cost from the pass's
//	fresh:    an empty node each time (the first pass after registration)
//
// Run with -short, so that TestMain does not start a control plane.
func BenchmarkDefaultSetters(b *testing.B) {
	ctx := context.Background()
	setup := func(b *testing.B) (nodestatus.Setters, *clocktesting.FakeClock, *corev1.Node) {
		host := nodestatustest.NewHost(nodestatustest.Facts("bench-node"))
		rt := nodestatustest.NewRuntime()
		rt.SetImages(nodestatustest.Images(50))
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		s, err := nodestatus.DefaultSetters(nodestatus.Options{Host: host, Runtime: rt, Clock: clk})
		if err != nil {
			b.Fatal(err)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bench-node"}}
		if err := s.SetStatus(ctx, node); err != nil {
			b.Fatal(err)
		}
		return s, clk, node
	}
	b.Run("steady", func(b *testing.B) {
		s, clk, node := setup(b)
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			clk.Step(10 * time.Second)
			if err := s.SetStatus(ctx, node); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, start)
	})
	b.Run("copy", func(b *testing.B) {
		s, clk, node := setup(b)
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			clk.Step(10 * time.Second)
			n := node.DeepCopy()
			if err := s.SetStatus(ctx, n); err != nil {
				b.Fatal(err)
			}
			node = n
		}
		reportCPU(b, start)
	})
	b.Run("copy-only", func(b *testing.B) { // the copy alone, for comparison with "copy"
		_, _, node := setup(b)
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			_ = node.DeepCopy()
		}
		reportCPU(b, start)
	})
	b.Run("fresh", func(b *testing.B) {
		s, clk, _ := setup(b)
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			clk.Step(10 * time.Second)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bench-node"}}
			if err := s.SetStatus(ctx, node); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, start)
	})
}
