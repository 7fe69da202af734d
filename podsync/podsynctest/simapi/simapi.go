package simapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/podsynctest"
)

// Defaults of Options: what a hollow node uses with no pods, so
// that metrics-server, which leaves out nodes that report no CPU or
// memory, shows it.
const (
	DefaultNodeCPU    = 50_000_000 // nanocores: 50m
	DefaultNodeMemory = 64 << 20   // bytes: 64Mi
)

// Options configure New. The zero value of each field means
// its default.
type Options struct {
	// NodeName is the node's name in its summary. Required.
	NodeName string
	// Backend runs the node's pods. Required.
	Backend *podsynctest.Backend
	// Pods returns the pods the node runs (the pod half's Pods). Required.
	Pods func(ctx context.Context) []*corev1.Pod
	// Usage is the CPU (nanocores) and memory (bytes) a container uses
	// since after its run started, and CPUTime the CPU time (nanoseconds)
	// it used by then: Rules.Usage and Rules.CPUTime. Default: nothing.
	Usage   func(pod *corev1.Pod, container string, since time.Duration) (cpuNanoCores, memoryBytes uint64)
	CPUTime func(pod *corev1.Pod, container string, since time.Duration) uint64
	// NodeCPU (nanocores) and NodeMemory (bytes) are what the node uses
	// beside its pods. Default DefaultNodeCPU and DefaultNodeMemory.
	NodeCPU, NodeMemory uint64
	// Clock is the Backend's. Default clock.RealClock{}.
	Clock clock.PassiveClock
}

// Node is what a hollow node's node API serves beyond its pods: the
// simulated usage as a summary (a nodeapi.Stats for /stats/summary and
// /metrics/resource) and the containers' log lines (nodeapi.Options.Logs).
// Give it as nodeapi.Options{Stats: n, Logs: n.Logs}.
type Node struct {
	o     Options
	start time.Time

	mu      sync.Mutex
	last    time.Time
	nodeCPU float64 // the node's CPU time up to last, in nanoseconds
}

var _ nodeapi.Stats = (*Node)(nil)

// New checks o.
func New(o Options) (*Node, error) {
	switch {
	case o.NodeName == "":
		return nil, errors.New("simapi: Options.NodeName is required")
	case o.Backend == nil:
		return nil, errors.New("simapi: Options.Backend is required")
	case o.Pods == nil:
		return nil, errors.New("simapi: Options.Pods is required")
	}
	if o.Usage == nil {
		o.Usage = func(*corev1.Pod, string, time.Duration) (uint64, uint64) { return 0, 0 }
	}
	if o.CPUTime == nil {
		o.CPUTime = func(*corev1.Pod, string, time.Duration) uint64 { return 0 }
	}
	if o.NodeCPU == 0 {
		o.NodeCPU = DefaultNodeCPU
	}
	if o.NodeMemory == 0 {
		o.NodeMemory = DefaultNodeMemory
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Node{o: o, start: o.Clock.Now()}, nil
}

// Latest returns the node's usage now: every running container's by
// Usage and CPUTime since its run started, summed per pod, and the node's
// as NodeCPU and NodeMemory plus its pods'. The node's CPU time only grows:
// it adds up the node's CPU use between calls, so pods that end take none
// of it back.
func (n *Node) Latest() *usage.Snapshot {
	now := n.o.Clock.Now()
	at := metav1.NewTime(now)
	s := &statsapi.Summary{}
	nodeCPU, nodeMem := n.o.NodeCPU, n.o.NodeMemory
	for _, pod := range n.o.Pods(context.Background()) {
		runs := n.o.Backend.Runs(pod.UID)
		ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}}
		var podCPU, podMem, podTime uint64
		for _, r := range runs {
			if !r.Running() {
				continue
			}
			since := now.Sub(r.StartedAt)
			cpu, mem := n.o.Usage(pod, r.Name, since)
			cum := n.o.CPUTime(pod, r.Name, since)
			podCPU, podMem, podTime = podCPU+cpu, podMem+mem, podTime+cum
			if ps.StartTime.IsZero() || r.StartedAt.Before(ps.StartTime.Time) {
				ps.StartTime = metav1.NewTime(r.StartedAt)
			}
			ps.Containers = append(ps.Containers, statsapi.ContainerStats{
				Name: r.Name, StartTime: metav1.NewTime(r.StartedAt),
				CPU:    &statsapi.CPUStats{Time: at, UsageNanoCores: ptr(cpu), UsageCoreNanoSeconds: ptr(cum)},
				Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr(mem), UsageBytes: ptr(mem), RSSBytes: ptr(mem)},
			})
		}
		if len(ps.Containers) == 0 {
			continue
		}
		if pod.Status.StartTime != nil {
			ps.StartTime = *pod.Status.StartTime
		}
		ps.CPU = &statsapi.CPUStats{Time: at, UsageNanoCores: ptr(podCPU), UsageCoreNanoSeconds: ptr(podTime)}
		ps.Memory = &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr(podMem), UsageBytes: ptr(podMem), RSSBytes: ptr(podMem)}
		s.Pods = append(s.Pods, ps)
		nodeCPU, nodeMem = nodeCPU+podCPU, nodeMem+podMem
	}
	n.mu.Lock()
	from := n.last
	if from.IsZero() {
		from = n.start
	}
	if d := now.Sub(from); d > 0 {
		n.nodeCPU += float64(nodeCPU) * d.Seconds()
		n.last = now
	}
	nodeTime := uint64(n.nodeCPU)
	n.mu.Unlock()
	s.Node = statsapi.NodeStats{NodeName: n.o.NodeName, StartTime: metav1.NewTime(n.start),
		CPU:    &statsapi.CPUStats{Time: at, UsageNanoCores: ptr(nodeCPU), UsageCoreNanoSeconds: ptr(nodeTime)},
		Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr(nodeMem), UsageBytes: ptr(nodeMem), RSSBytes: ptr(nodeMem)},
	}
	return &usage.Snapshot{Time: now, Summary: s}
}

func ptr(v uint64) *uint64 { return &v }

// Logs returns the simulated log of the pod's container: a line when its
// run started and one when it exited, for its last run, or the run before
// that with previous. A pod the node does not run, or a container with no
// such run, is an error naming it.
func (n *Node) Logs(ctx context.Context, namespace, pod, container string, previous bool) ([]nodeapi.LogLine, error) {
	var found *corev1.Pod
	for _, p := range n.o.Pods(ctx) {
		if p.Namespace == namespace && p.Name == pod {
			found = p
			break
		}
	}
	if found == nil {
		return nil, fmt.Errorf("pod %s/%s is not on node %s", namespace, pod, n.o.NodeName)
	}
	var runs []podsynctest.ContainerRun
	for _, r := range n.o.Backend.Runs(found.UID) {
		if r.Name == container {
			runs = append(runs, r)
		}
	}
	i := len(runs) - 1
	if previous {
		i--
	}
	if i < 0 {
		what := "container"
		if previous {
			what = "previous terminated container"
		}
		return nil, fmt.Errorf("%s %q in pod %s/%s not found", what, container, namespace, pod)
	}
	r := runs[i]
	lines := []nodeapi.LogLine{{Time: r.StartedAt,
		Message: fmt.Sprintf("simulated container %s of pod %s/%s started (restart %d) on node %s", container, namespace, pod, r.Restart, n.o.NodeName)}}
	if !r.Running() {
		lines = append(lines, nodeapi.LogLine{Time: r.FinishedAt, Message: fmt.Sprintf("simulated container %s exited with code %d", container, r.ExitCode)})
	}
	return lines, nil
}
