package simapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/podsynctest"
	"github.com/nodekit/nodekit/podsync/podsynctest/simapi"
)

func parse(t *testing.T, in string) *podsynctest.Rules {
	t.Helper()
	r, err := podsynctest.ParseRules(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "app", Image: "img"}}}}
}

// simNode runs pod on a simulated backend with rules and serves its node
// API parts through a nodeapi.Handler.
func simNode(t *testing.T, rules string, pod *corev1.Pod) (*clocktesting.FakeClock, *podsynctest.Backend, *simapi.Node, http.Handler, func()) {
	t.Helper()
	r := parse(t, rules)
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := podsynctest.New(podsynctest.Options{Clock: clock, Stages: r.Stages})
	e, err := podsync.New(podsync.Options{Syncer: b, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	n, err := simapi.New(simapi.Options{NodeName: "hollow-0", Backend: b, Clock: clock,
		Pods:  func(context.Context) []*corev1.Pod { return []*corev1.Pod{pod} },
		Usage: r.Usage, CPUTime: r.CPUTime})
	if err != nil {
		t.Fatal(err)
	}
	h, err := nodeapi.New(nodeapi.Options{Stats: n, Logs: n.Logs, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	steps := func() {
		for range 2 {
			e.RelistNow()
			if _, err := e.SyncOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps()
	return clock, b, n, h, steps
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestNodeAPIUsage(t *testing.T) {
	clock, b, n, h, steps := simNode(t, `
rules:
- selector: {containers: [app]}
  cpu: {from: 100m, to: 300m, over: 10s}
  memory: 100Mi
`, newPod("web"))
	clock.Step(10 * time.Second)
	code, body := get(t, h, "/stats/summary")
	if code != http.StatusOK {
		t.Fatalf("/stats/summary: %d %s", code, body)
	}
	var s statsapi.Summary
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 {
		t.Fatalf("pods %+v", s.Pods)
	}
	c := s.Pods[0].Containers[0]
	if *c.CPU.UsageNanoCores != 300_000_000 || *c.CPU.UsageCoreNanoSeconds != 2_000_000_000 || *c.Memory.WorkingSetBytes != 100<<20 {
		t.Errorf("container cpu %d (%d ns) memory %d, want 300m, 2s, 100Mi", *c.CPU.UsageNanoCores, *c.CPU.UsageCoreNanoSeconds, *c.Memory.WorkingSetBytes)
	}
	if s.Node.NodeName != "hollow-0" || *s.Node.CPU.UsageNanoCores != simapi.DefaultNodeCPU+300_000_000 ||
		*s.Node.Memory.WorkingSetBytes != simapi.DefaultNodeMemory+100<<20 {
		t.Errorf("node %s cpu %d memory %d", s.Node.NodeName, *s.Node.CPU.UsageNanoCores, *s.Node.Memory.WorkingSetBytes)
	}
	code, body = get(t, h, "/metrics/resource")
	if code != http.StatusOK || !strings.Contains(body, `container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 `) {
		t.Errorf("/metrics/resource: %d\n%s", code, body)
	}
	// The container crashes and restarts at once (the first restart has no
	// back-off): the new run's use starts again from its rule's start, its
	// CPU time from zero, and the node's CPU time keeps growing (a counter
	// metrics-server takes rates of).
	before := *n.Latest().Summary.Node.CPU.UsageCoreNanoSeconds
	if !b.Exit("uid-web", "app", 1) {
		t.Fatal("nothing running")
	}
	steps()
	clock.Step(time.Second)
	after := n.Latest().Summary
	if len(after.Pods) != 1 || len(after.Pods[0].Containers) != 1 {
		t.Fatalf("after the restart: %+v", after.Pods)
	}
	c = after.Pods[0].Containers[0]
	if want := clock.Now().Add(-time.Second); !c.StartTime.Time.Equal(want) {
		t.Errorf("the restarted container's start time %v, want %v", c.StartTime, want)
	}
	if *c.CPU.UsageNanoCores != 120_000_000 || *c.CPU.UsageCoreNanoSeconds != 110_000_000 {
		t.Errorf("restarted container cpu %d (%d ns), want 120m, 110ms", *c.CPU.UsageNanoCores, *c.CPU.UsageCoreNanoSeconds)
	}
	if got := *after.Node.CPU.UsageCoreNanoSeconds; got <= before {
		t.Errorf("node CPU time %d after %d: not growing", got, before)
	}
}

func TestNodeAPIFinishedPod(t *testing.T) {
	pod := newPod("job")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	clock, b, n, _, steps := simNode(t, `
rules:
- selector: {containers: [app]}
  memory: 10Mi
`, pod)
	if got := n.Latest().Summary; len(got.Pods) != 1 || *got.Node.Memory.WorkingSetBytes != simapi.DefaultNodeMemory+10<<20 {
		t.Fatalf("running: %+v", got)
	}
	b.Exit("uid-job", "app", 0)
	steps()
	clock.Step(time.Second)
	if got := n.Latest().Summary; len(got.Pods) != 0 || *got.Node.Memory.WorkingSetBytes != simapi.DefaultNodeMemory {
		t.Errorf("a finished pod still uses memory: pods %+v, node %d", got.Pods, *got.Node.Memory.WorkingSetBytes)
	}
}

func TestNodeAPILogs(t *testing.T) {
	clock, b, _, h, steps := simNode(t, `rules: []`, newPod("web"))
	code, body := get(t, h, "/containerLogs/default/web/app")
	if code != http.StatusOK || !strings.Contains(body, "simulated container app of pod default/web started (restart 0) on node hollow-0\n") {
		t.Fatalf("logs: %d %q", code, body)
	}
	if code, body = get(t, h, "/containerLogs/default/web/app?previous=true"); code != http.StatusNotFound || !strings.Contains(body, "previous terminated container") {
		t.Errorf("previous before a restart: %d %q", code, body)
	}
	b.Exit("uid-web", "app", 3)
	steps()
	clock.Step(10 * time.Second) // the crash-loop back-off
	steps()
	code, body = get(t, h, "/containerLogs/default/web/app?previous=true&timestamps=true")
	if code != http.StatusOK || !strings.Contains(body, "2026-01-01T00:00:00Z simulated container app of pod default/web started (restart 0)") ||
		!strings.HasSuffix(body, "Z simulated container app exited with code 3\n") {
		t.Errorf("previous: %d %q", code, body)
	}
	code, body = get(t, h, "/containerLogs/default/web/app?tailLines=1")
	if code != http.StatusOK || !strings.Contains(body, "started (restart 1)") {
		t.Errorf("current: %d %q", code, body)
	}
	if code, body = get(t, h, "/containerLogs/default/web/app?previous=true&limitBytes=9"); code != http.StatusOK || body != "simulated" {
		t.Errorf("limitBytes: %d %q", code, body)
	}
	if code, body = get(t, h, "/containerLogs/default/other/app"); code != http.StatusNotFound || !strings.Contains(body, "pod default/other is not on node hollow-0") {
		t.Errorf("another pod: %d %q", code, body)
	}
	if code, _ = get(t, h, "/containerLogs/default/web/sidecar"); code != http.StatusNotFound {
		t.Errorf("another container: %d", code)
	}
}
