package simapi_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
	"github.com/nodekit/nodekit/podsync/podsynctest/simapi"
)

// A simulated node's node API parts: a container whose CPU ramps up, read
// as the summary a nodeapi.Handler serves (Stats) and as its log lines
// (Logs).
func Example() {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rules, err := podsynctest.ParseRules(strings.NewReader(`
rules:
- selector: {containers: [app]}
  cpu: {from: 100m, to: 500m, over: 1m}
  memory: 200Mi
`))
	if err != nil {
		panic(err)
	}
	backend := podsynctest.New(podsynctest.Options{Clock: clock, Stages: rules.Stages})
	engine, err := podsync.New(podsync.Options{Syncer: backend, Clock: clock})
	if err != nil {
		panic(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web"}}}}
	engine.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	_, _ = engine.SyncOnce(ctx)
	node, err := simapi.New(simapi.Options{NodeName: "hollow-0", Backend: backend, Clock: clock,
		Pods:  func(context.Context) []*corev1.Pod { return []*corev1.Pod{pod} },
		Usage: rules.Usage, CPUTime: rules.CPUTime})
	if err != nil {
		panic(err)
	}
	clock.Step(30 * time.Second)
	s := node.Latest().Summary
	c := s.Pods[0].Containers[0]
	fmt.Printf("container %s: %dm CPU, %.1f CPU-seconds, %d MiB\n", c.Name, *c.CPU.UsageNanoCores/1e6,
		float64(*c.CPU.UsageCoreNanoSeconds)/1e9, *c.Memory.WorkingSetBytes>>20)
	fmt.Printf("node %s: %dm CPU, %d MiB\n", s.Node.NodeName, *s.Node.CPU.UsageNanoCores/1e6, *s.Node.Memory.WorkingSetBytes>>20)
	lines, _ := node.Logs(ctx, "default", "web", "app", false)
	fmt.Println(lines[0].Message)
	// Output:
	// container app: 300m CPU, 6.0 CPU-seconds, 200 MiB
	// node hollow-0: 350m CPU, 264 MiB
	// simulated container app of pod default/web started (restart 0) on node hollow-0
}
