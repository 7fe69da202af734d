package podsynctest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
	"github.com/nodekit/nodekit/probe"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func parse(t *testing.T, in string) *podsynctest.Rules {
	t.Helper()
	r, err := podsynctest.ParseRules(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type podOpt func(*corev1.Pod)

func labelled(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func annotated(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func inNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

func ownedByJob(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "job-uid"}}
}

func withContainers(names ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers = nil
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: "img"})
		}
	}
}

func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "app", Image: "img"}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

var kwokStages = podsynctest.Stages{StopExitCode: 137}

func TestRulesFile(t *testing.T) {
	r, err := podsynctest.LoadRules("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 5 {
		t.Fatalf("Len = %d", r.Len())
	}
	web := newPod("web-1", labelled("app", "web"), withContainers("app", "proxy"))
	flaky := newPod("flaky-7", inNamespace("jobs"), labelled("tier", "batch"), ownedByJob)
	steady := newPod("steady-7", inNamespace("jobs"), labelled("tier", "batch"), ownedByJob)
	broken := newPod("b", labelled("sim.example.com/broken", ""))
	for _, tc := range []struct {
		pod       *corev1.Pod
		container string
		want      podsynctest.Stages
	}{
		{web, "app", podsynctest.Stages{StartDelay: 3 * time.Second, StopExitCode: 137}},
		{web, "proxy", kwokStages},
		{flaky, "app", podsynctest.Stages{RunFor: 30 * time.Second, ExitCode: 3, StopExitCode: 137}},
		{steady, "app", podsynctest.Stages{RunFor: time.Minute, StopExitCode: 137}},
		{broken, "app", podsynctest.Stages{StopExitCode: 137, FailCreate: "failed to create containerd container: no space left on device"}},
		{newPod("other"), "app", kwokStages},
	} {
		if got := r.Stages(tc.pod, tc.container); got != tc.want {
			t.Errorf("%s/%s: %+v, want %+v", tc.pod.Name, tc.container, got, tc.want)
		}
	}
	for _, tc := range []struct {
		container string
		since     time.Duration
		cpu, mem  uint64
	}{
		{"app", 0, 10_000_000, 64 << 20},
		{"app", 150 * time.Second, 105_000_000, 64 << 20},
		{"app", time.Hour, 200_000_000, 64 << 20},
		{"proxy", 5 * time.Minute, 0, 144 << 20},
	} {
		if cpu, mem := r.Usage(web, tc.container, tc.since); cpu != tc.cpu || mem != tc.mem {
			t.Errorf("%s at %v: cpu %d memory %d, want %d %d", tc.container, tc.since, cpu, mem, tc.cpu, tc.mem)
		}
	}
}

// The same rules as JSON behave as the YAML file does.
func TestRulesJSON(t *testing.T) {
	y, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(js) || !strings.HasPrefix(string(js), `{"rules":[`) {
		t.Fatalf("not JSON: %.40s", js)
	}
	fromYAML := parse(t, string(y))
	fromJSON := parse(t, string(js))
	for _, pod := range []*corev1.Pod{
		newPod("web-1", labelled("app", "web"), withContainers("app", "proxy")),
		newPod("flaky-1", inNamespace("jobs"), labelled("tier", "batch")),
		newPod("x", ownedByJob), newPod("y"),
	} {
		for _, c := range pod.Spec.Containers {
			if a, b := fromYAML.Stages(pod, c.Name), fromJSON.Stages(pod, c.Name); a != b {
				t.Errorf("%s/%s: YAML %+v, JSON %+v", pod.Name, c.Name, a, b)
			}
			for _, since := range []time.Duration{0, time.Minute, time.Hour} {
				ac, am := fromYAML.Usage(pod, c.Name, since)
				bc, bm := fromJSON.Usage(pod, c.Name, since)
				if ac != bc || am != bm {
					t.Errorf("%s/%s at %v: YAML %d/%d, JSON %d/%d", pod.Name, c.Name, since, ac, am, bc, bm)
				}
			}
		}
	}
}

func TestRulesErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"rules:\n- startDelya: 1s\n", `rules[0]: unknown field "startDelya"`},
		{"rules:\n- {}\n- name: web\n  startDelay: 5x\n", `rules[1] (web): startDelay: unknown unit "x" in duration "5x"`},
		{"rules:\n- startDelay: 5\n", `rules[0]: startDelay: want a duration string such as "5s", got 5`},
		{"rules:\n- runFor: -1s\n", `rules[0]: runFor: negative duration "-1s"`},
		{"rules:\n- readinessDelay: soon\n", `rules[0]: readinessDelay: invalid duration "soon"`},
		{"rules:\n- exitCode: \"1\"\n", `rules[0]: exitCode: want a 32-bit integer, got string`},
		{"rules:\n- stopExitCode: 99999999999\n", `rules[0]: stopExitCode: want a 32-bit integer`},
		{"rules:\n- selector: {matchLabels: {app: \"a b\"}}\n", `rules[0]: selector: `},
		{"rules:\n- selector: {matchExpressions: [{key: a, operator: Foo}]}\n", `rules[0]: selector: "Foo" is not a valid label selector operator`},
		{"rules:\n- selector: {matchLabel: {a: b}}\n", `rules[0]: selector: unknown field "matchLabel"`},
		{"rules:\n- selector: {namespaces: default}\n", `rules[0]: selector: namespaces: want a list, got string`},
		{"rules:\n- selector: {containers: [\"\"]}\n", `rules[0]: selector.containers: an empty name`},
		{"rules:\n- {}\n- {}\n- cpu: 10x\n", `rules[2]: cpu: want a quantity such as "250m", got "10x"`},
		{"rules:\n- cpu: {from: 10m, to: 1}\n", `rules[0]: cpu.over: required with to`},
		{"rules:\n- cpu: {over: 1m}\n", `rules[0]: cpu.from: required`},
		{"rules:\n- cpu: {from: 1, to: 2, over: 0s}\n", `rules[0]: cpu.over: must be more than 0`},
		{"rules:\n- cpu: {form: 10m}\n", `rules[0]: cpu: unknown field "form"`},
		{"rules:\n- cpu: 2M\n", `rules[0]: cpu: 2M is more than 1M cores`},
		{"rules:\n- memory: {from: 1, to: 2, over: 3}\n", `rules[0]: memory.over: want a duration string such as "5s", got 3`},
		{"rules:\n- memory: -1\n", `rules[0]: memory: negative quantity -1`},
		{"rules:\n- memory: 2Ei\n", `rules[0]: memory: 2Ei is more than 1Ei`},
		{"rules:\n- startDelay: 1s\n  startDelay: 2s\n", `already set`},
		{"rule: []\n", `rules: unknown field "rule"`},
		{"[]\n", `rules: want an object, got array`},
		{"rules: {}\n", `rules: rules: want a list, got object`},
		{"rules:\n- 3\n", `rules[0]: want an object, got number`},
		{`{"rules": [{"runFor": "1s", "bogus": 1}]}`, `rules[0]: unknown field "bogus"`},
		{`{"rules": [{"runFor": "1s"}]`, `rules: `},
		{"rules: []\n---\nrules: [{}]\n", `rules: more than one YAML document (another begins at line 2)`},
		{"rules: [{}]\n...\nfoo\n", `rules: yaml: line 2: did not find expected <document start>`},
	} {
		_, err := podsynctest.ParseRules(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.want)
		}
	}
	if _, err := podsynctest.LoadRules("testdata/none.yaml"); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestRulesBounds(t *testing.T) {
	big := "rules: []\n" + strings.Repeat("#", podsynctest.MaxRulesBytes)
	if _, err := podsynctest.ParseRules(strings.NewReader(big)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("over 1 MiB: %v", err)
	}
	if _, err := podsynctest.ParseRules(strings.NewReader(big[:podsynctest.MaxRulesBytes])); err != nil {
		t.Errorf("exactly 1 MiB: %v", err)
	}
	many := "rules:\n" + strings.Repeat("- {}\n", podsynctest.MaxRules)
	if r, err := podsynctest.ParseRules(strings.NewReader(many)); err != nil || r.Len() != podsynctest.MaxRules {
		t.Errorf("%d rules: %v", podsynctest.MaxRules, err)
	}
	many += "- {}\n"
	if _, err := podsynctest.ParseRules(strings.NewReader(many)); err == nil || !strings.Contains(err.Error(), "10001 rules, more than the 10000 allowed") {
		t.Errorf("%d rules: %v", podsynctest.MaxRules+1, err)
	}
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'k'; i++ {
		prev := string(i - 1)
		bomb += fmt.Sprintf("%c: &%c [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", i, i, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
	}
	if _, err := podsynctest.ParseRules(strings.NewReader(bomb)); err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Errorf("an alias bomb: %v", err)
	}
	wide := "x: &x " + strings.Repeat("y", 100<<10) + "\nrules: [" + strings.Repeat("{name: *x}, ", 100) + "]\n"
	if _, err := podsynctest.ParseRules(strings.NewReader(wide)); err == nil || !strings.Contains(err.Error(), "bytes of JSON through YAML aliases, more than 8388608") {
		t.Errorf("aliases expanding to 10 MB: %v", err)
	}
	var empty *podsynctest.Rules
	for _, in := range []string{"", "# nothing\n", "rules: []\n", "rules:\n", "---\nrules: []\n---\n", "rules: []\n...\n"} {
		r := parse(t, in)
		if r.Len() != 0 || r.Stages(newPod("p"), "app") != empty.Stages(newPod("p"), "app") {
			t.Errorf("%q: %d rules", in, r.Len())
		}
	}
}

func TestRulesOrder(t *testing.T) {
	r := parse(t, `
rules:
- name: sidecar
  selector: {containers: [proxy, log]}
  exitCode: 1
- name: prefix-and-namespace
  selector: {namespaces: [a, b], namePrefix: web-}
  exitCode: 2
- name: labels
  selector:
    matchLabels: {app: web}
    matchExpressions: [{key: tier, operator: NotIn, values: [db]}]
  exitCode: 3
- name: owner
  selector: {ownerKind: Job}
  exitCode: 4
- name: web
  selector: {matchLabels: {app: web}}
  exitCode: 5
- name: everything
  exitCode: 6
`)
	for _, tc := range []struct {
		pod       *corev1.Pod
		container string
		want      int32
	}{
		{newPod("web-1", inNamespace("a"), withContainers("app", "proxy")), "proxy", 1},
		{newPod("web-1", inNamespace("a"), withContainers("app", "proxy")), "app", 2},
		{newPod("web-1", inNamespace("c"), labelled("app", "web")), "app", 3},
		{newPod("web-1", inNamespace("c"), labelled("app", "web", "tier", "db")), "app", 5},
		{newPod("web-1", inNamespace("c"), labelled("app", "api")), "app", 6},
		{newPod("api-1", inNamespace("b"), labelled("app", "web", "tier", "fe"), ownedByJob), "app", 3},
		{newPod("api-1", inNamespace("b"), ownedByJob), "app", 4},
		{newPod("x"), "log", 1},
		{newPod("x"), "app", 6},
	} {
		if got := r.Stages(tc.pod, tc.container).ExitCode; got != tc.want {
			t.Errorf("%s/%s in %s: rule with exit code %d, want %d", tc.pod.Name, tc.container, tc.pod.Namespace, got, tc.want)
		}
	}
}

func TestAnnotationsOverride(t *testing.T) {
	r := parse(t, `
rules:
- selector: {matchLabels: {app: web}}
  startDelay: 3s
  runFor: 1m
  exitCode: 2
  readinessDelay: 5s
  cpu: 100m
  memory: {from: 10Mi, to: 20Mi, over: 10s}
`)
	pod := newPod("web-1", labelled("app", "web"), annotated(
		podsynctest.AnnotationStartDelay, "1s",
		podsynctest.AnnotationRunFor, "0s",
		podsynctest.AnnotationExitCode, "7",
		podsynctest.AnnotationStopExitCode, "143",
		podsynctest.AnnotationCPU, "{from: 0, to: 1, over: 10s}",
		podsynctest.AnnotationMemory, "1Gi",
		"other.example.com/start-delay", "not ours",
	))
	if got, want := r.Stages(pod, "app"), (podsynctest.Stages{StartDelay: time.Second, ExitCode: 7, StopExitCode: 143}); got != want {
		t.Errorf("stages %+v, want %+v", got, want)
	}
	if cpu, mem := r.Usage(pod, "app", 5*time.Second); cpu != 500_000_000 || mem != 1<<30 {
		t.Errorf("usage %d %d", cpu, mem)
	}
	// Annotations apply without rules too, and to a pod no rule matches.
	var none *podsynctest.Rules
	plain := newPod("p", annotated(podsynctest.AnnotationFailCreate, "image is broken", podsynctest.AnnotationRunFor, "5s"))
	for _, rs := range []*podsynctest.Rules{none, r} {
		if got := rs.Stages(plain, "app"); got != (podsynctest.Stages{RunFor: 5 * time.Second, StopExitCode: 137, FailCreate: "image is broken"}) {
			t.Errorf("%+v", got)
		}
	}
}

func TestBadAnnotations(t *testing.T) {
	var r *podsynctest.Rules
	for _, tc := range []struct {
		ann  []string
		want string
	}{
		{[]string{podsynctest.AnnotationStartDelay, "abc"}, `invalid annotation sim.nodekit.io/start-delay="abc": invalid duration "abc"`},
		{[]string{podsynctest.AnnotationRunFor, "30"}, `invalid annotation sim.nodekit.io/run-for="30": missing unit in duration "30"`},
		{[]string{podsynctest.AnnotationExitCode, "one"}, `invalid annotation sim.nodekit.io/exit-code="one": want an exit code`},
		{[]string{podsynctest.AnnotationReadinessDelay, "-5s"}, `invalid annotation sim.nodekit.io/readiness-delay="-5s": negative duration`},
		{[]string{podsynctest.AnnotationCPU, "lots"}, `invalid annotation sim.nodekit.io/cpu="lots": want a quantity such as "250m"`},
		{[]string{podsynctest.AnnotationMemory, "{from: 1Mi, to: 2Mi}"}, `invalid annotation sim.nodekit.io/memory="{from: 1Mi, to: 2Mi}": over: required with to`},
		{[]string{podsynctest.AnnotationMemory, ""}, `invalid annotation sim.nodekit.io/memory="": want a quantity or a ramp`},
		{[]string{"sim.nodekit.io/startdelay", "1s"}, `unknown annotation sim.nodekit.io/startdelay`},
		{[]string{podsynctest.AnnotationLivenessFailAfter, "x", podsynctest.AnnotationStartupDelay, "y"},
			`invalid annotation sim.nodekit.io/liveness-fail-after="x": invalid duration "x"; invalid annotation sim.nodekit.io/startup-delay="y"`},
	} {
		pod := newPod("p", annotated(tc.ann...))
		s := r.Stages(pod, "app")
		if !strings.Contains(s.FailCreate, tc.want) {
			t.Errorf("%v: FailCreate %q, want %q", tc.ann, s.FailCreate, tc.want)
		}
		if cpu, mem := r.Usage(pod, "app", time.Minute); cpu != 0 || mem != 0 {
			t.Errorf("%v: usage %d %d", tc.ann, cpu, mem)
		}
	}

	// Through the Backend and the engine: the container waits in
	// CreateContainerError with the message.
	_, _, e, steps := setup(t, r.Stages)
	pod := newPod("p", annotated(podsynctest.AnnotationStartDelay, "soon"))
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	steps(2)
	s, _ := e.PodStatus(pod.UID)
	w := s.ContainerStatuses[0].State.Waiting
	if w == nil || w.Reason != podsync.ReasonCreateContainerError || w.Message != `invalid annotation sim.nodekit.io/start-delay="soon": invalid duration "soon"` {
		t.Fatalf("%+v", s.ContainerStatuses[0].State)
	}
}

func TestUsageRamp(t *testing.T) {
	r := parse(t, `
rules:
- selector: {containers: [up]}
  cpu: {from: 100m, to: 1100m, over: 10s}
  memory: {from: 1Gi, to: 2Gi, over: 1h}
- selector: {containers: [down]}
  cpu: {from: 2, to: 0, over: 4s}
  memory: {from: 100, to: 0, over: 3ns}
- selector: {containers: [flat]}
  cpu: {from: 250m}
  memory: 1.5Gi
- selector: {containers: [huge]}
  cpu: {from: 0, to: 1M, over: 290h}
  memory: {from: 0, to: 1Ei, over: 290h}
`)
	pod := newPod("p", withContainers("up", "down", "flat", "huge", "none"))
	for _, tc := range []struct {
		container string
		since     time.Duration
		cpu, mem  uint64
	}{
		{"up", -time.Second, 100_000_000, 1 << 30},
		{"up", 0, 100_000_000, 1 << 30},
		{"up", time.Second, 200_000_000, 1<<30 + (1<<30)/3600},
		{"up", 2500 * time.Millisecond, 350_000_000, 1<<30 + (1<<30)*2500/3600000},
		{"up", 10 * time.Second, 1_100_000_000, 1<<30 + (1<<30)/360},
		{"up", time.Hour, 1_100_000_000, 2 << 30},
		{"up", 100 * time.Hour, 1_100_000_000, 2 << 30},
		{"down", time.Second, 1_500_000_000, 0},
		{"down", 3 * time.Second, 500_000_000, 0},
		{"down", time.Nanosecond, 2_000_000_000, 67}, // 2 cores less 0.5 nanocores, the decrease rounded down
		{"flat", 0, 250_000_000, 3 << 29},
		{"flat", time.Hour, 250_000_000, 3 << 29},
		{"huge", 145 * time.Hour, 500_000_000_000_000, 1 << 59},
		{"huge", 290 * time.Hour, 1_000_000_000_000_000, 1 << 60},
		{"none", time.Hour, 0, 0},
	} {
		if cpu, mem := r.Usage(pod, tc.container, tc.since); cpu != tc.cpu || mem != tc.mem {
			t.Errorf("%s at %v: cpu %d memory %d, want %d %d", tc.container, tc.since, cpu, mem, tc.cpu, tc.mem)
		}
	}
}

func exec(cmd string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}, PeriodSeconds: 1}
}

func TestProberOutcomes(t *testing.T) {
	r := parse(t, `
rules:
- selector: {containers: [app]}
  startupDelay: 3s
  readinessDelay: 5s
  livenessFailAfter: 10s
`)
	clock := clocktesting.NewFakeClock(t0)
	b := podsynctest.New(podsynctest.Options{Clock: clock, Stages: r.Stages})
	pr, err := r.Prober(podsynctest.ProberOptions{StartedAt: b.StartedAt, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod("p", withContainers("app", "shared", "other"))
	app := &pod.Spec.Containers[0]
	app.StartupProbe, app.ReadinessProbe, app.LivenessProbe = exec("startup"), exec("ready"), exec("alive")
	shared := &pod.Spec.Containers[1]
	shared.ReadinessProbe, shared.LivenessProbe = exec("health"), exec("health")
	// The engine is not needed: SyncPod starts the containers.
	if _, err := b.SyncPod(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	state, _ := b.Relist(context.Background())
	ids := map[string]string{}
	for _, c := range state[pod.UID].Containers {
		ids[c.Name] = "sim://" + c.ID
	}
	run := func(c *corev1.Container, spec *corev1.Probe) probe.Outcome {
		// As probe.Manager runs it: a copy of the spec with its defaults.
		return pr.Probe(context.Background(), probe.Defaults(spec), probe.Target{Pod: pod, Container: c.DeepCopy(), ContainerID: ids[c.Name]})
	}
	type results struct{ startup, ready, alive probe.Result }
	for _, tc := range []struct {
		at   time.Duration
		want results
	}{
		{0, results{probe.Failure, probe.Failure, probe.Success}},
		{2999 * time.Millisecond, results{probe.Failure, probe.Failure, probe.Success}},
		{3 * time.Second, results{probe.Success, probe.Failure, probe.Success}},
		{5 * time.Second, results{probe.Success, probe.Success, probe.Success}},
		{10*time.Second - 1, results{probe.Success, probe.Success, probe.Success}},
		{10 * time.Second, results{probe.Success, probe.Success, probe.Failure}},
		{time.Hour, results{probe.Success, probe.Success, probe.Failure}},
	} {
		clock.SetTime(t0.Add(tc.at))
		got := results{run(app, app.StartupProbe).Result, run(app, app.ReadinessProbe).Result, run(app, app.LivenessProbe).Result}
		if got != tc.want {
			t.Errorf("at %v: %+v, want %+v", tc.at, got, tc.want)
		}
	}
	if out := run(app, app.ReadinessProbe); out.Result != probe.Success || out.Err != nil {
		t.Errorf("%+v", out)
	}
	clock.SetTime(t0.Add(time.Second))
	if out := run(app, app.ReadinessProbe); out.Message != "simulated: readiness probe passes 5s after the container started, 1s so far" {
		t.Errorf("message %q", out.Message)
	}

	// A spec two probe kinds share is one endpoint: it passes when both
	// kinds' rules pass.
	r2 := parse(t, "rules:\n- selector: {containers: [shared]}\n  readinessDelay: 5s\n  livenessFailAfter: 10s\n")
	pr2, _ := r2.Prober(podsynctest.ProberOptions{StartedAt: b.StartedAt, Clock: clock})
	for at, want := range map[time.Duration]probe.Result{0: probe.Failure, 5 * time.Second: probe.Success, 10 * time.Second: probe.Failure} {
		clock.SetTime(t0.Add(at))
		out := pr2.Probe(context.Background(), probe.Defaults(shared.LivenessProbe), probe.Target{Pod: pod, Container: shared, ContainerID: ids["shared"]})
		if out.Result != want {
			t.Errorf("shared at %v: %+v, want %v", at, out, want)
		}
	}

	// What the prober cannot answer is an error.
	bad := newPod("p", withContainers("app", "shared", "other"), annotated(podsynctest.AnnotationReadinessDelay, "x"))
	bad.Spec = pod.Spec
	for name, tc := range map[string]struct {
		spec   *corev1.Probe
		target probe.Target
		want   string
	}{
		"no container":     {app.ReadinessProbe, probe.Target{Pod: pod, ContainerID: ids["app"]}, "no pod or container"},
		"not its probe":    {exec("something else"), probe.Target{Pod: pod, Container: app, ContainerID: ids["app"]}, "none of container app's probes"},
		"not started":      {app.ReadinessProbe, probe.Target{Pod: pod, Container: app, ContainerID: "sim://container-999999"}, "has not started"},
		"bad annotation":   {app.ReadinessProbe, probe.Target{Pod: bad, Container: app, ContainerID: ids["app"]}, "invalid annotation sim.nodekit.io/readiness-delay"},
		"other pod's uid":  {app.ReadinessProbe, probe.Target{Pod: newPod("q", withContainers("app")), Container: app, ContainerID: ids["app"]}, "has not started"},
		"spec of no probe": {nil, probe.Target{Pod: pod, Container: app, ContainerID: ids["app"]}, "none of container app's probes"},
	} {
		out := pr.Probe(context.Background(), tc.spec, tc.target)
		if out.Err == nil || out.Result != probe.Unknown || !strings.Contains(out.Err.Error(), tc.want) {
			t.Errorf("%s: %+v, want an error with %q", name, out, tc.want)
		}
	}
	if _, err := r.Prober(podsynctest.ProberOptions{}); err == nil {
		t.Error("Prober without StartedAt: no error")
	}
}

// probed runs a Backend under an engine and a probe manager whose prober
// follows r, all on one fake clock; steps relists, syncs and probes.
func probed(t *testing.T, r *podsynctest.Rules) (*clocktesting.FakeClock, *podsynctest.Backend, *podsync.Engine, func(n int)) {
	t.Helper()
	clock := clocktesting.NewFakeClock(t0)
	var b *podsynctest.Backend // the prober asks it, and it asks the manager
	pr, err := r.Prober(podsynctest.ProberOptions{Clock: clock,
		StartedAt: func(uid types.UID, id string) (time.Time, bool) { return b.StartedAt(uid, id) }})
	if err != nil {
		t.Fatal(err)
	}
	m, err := probe.New(probe.Options{Prober: pr, Clock: clock, NoStartJitter: true})
	if err != nil {
		t.Fatal(err)
	}
	b = podsynctest.New(podsynctest.Options{Clock: clock, Stages: r.Stages, Probes: m})
	e, err := podsync.New(podsync.Options{Syncer: b, Clock: clock, Probes: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	updates := m.Subscribe(ctx, 1024) // what the engine's Run wakes pods on
	steps := func(n int) {
		for range n {
			e.RelistNow()
			if _, err := e.SyncOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := m.SyncOnce(ctx); err != nil {
				t.Fatal(err)
			}
			for len(updates) > 0 {
				e.Trigger((<-updates).PodUID)
			}
		}
	}
	return clock, b, e, steps
}

func TestProbesThroughEngine(t *testing.T) {
	r := parse(t, "rules:\n- startDelay: 2s\n  readinessDelay: 5s\n  livenessFailAfter: 20s\n")
	clock, _, e, steps := probed(t, r)
	pod := newPod("web")
	c := &pod.Spec.Containers[0]
	c.ReadinessProbe, c.LivenessProbe = exec("ready"), exec("alive")
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	type seen struct {
		ready    bool
		restarts int32
		state    string
	}
	var log []string
	last := seen{}
	for range 60 {
		steps(3)
		s, _ := e.PodStatus(pod.UID)
		cs := s.ContainerStatuses[0]
		now := seen{ready: cs.Ready, restarts: cs.RestartCount, state: "running"}
		switch {
		case cs.State.Waiting != nil:
			now.state = cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			now.state = cs.State.Terminated.Reason
		}
		if now != last {
			log = append(log, fmt.Sprintf("t=%v %s ready=%v restarts=%d", clock.Since(t0), now.state, now.ready, now.restarts))
			last = now
		}
		clock.Step(time.Second)
	}
	// Started at 2s, ready at 7s (5s after), liveness failing from 22s;
	// failureThreshold 3 every 1s has it killed and started again at 24s
	// (the kubelet shows the wait as CrashLoopBackOff), running 2s later
	// (restarts=1), ready 5s after that, and so on. The second kill comes
	// more than the 10s back-off after the first restart: no wait.
	want := []string{
		"t=0s ContainerCreating ready=false restarts=0",
		"t=2s running ready=false restarts=0",
		"t=7s running ready=true restarts=0",
		"t=24s CrashLoopBackOff ready=false restarts=0",
		"t=26s running ready=false restarts=1",
		"t=31s running ready=true restarts=1",
		"t=48s CrashLoopBackOff ready=false restarts=1",
		"t=50s running ready=false restarts=2",
		"t=55s running ready=true restarts=2",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

// Without rules (and with no annotations) pods behave as under kwok's
// default stages: running and ready at once, probes passing at once, init
// containers and Jobs' pods completing, stopped when deleted.
func TestDefaultIsKwok(t *testing.T) {
	var r *podsynctest.Rules
	clock, b, e, steps := probed(t, r)
	always := corev1.ContainerRestartPolicyAlways
	web := newPod("web", withContainers("app"))
	web.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img"}, {Name: "sidecar", Image: "img", RestartPolicy: &always, StartupProbe: exec("started")}}
	web.Spec.Containers[0].ReadinessProbe, web.Spec.Containers[0].LivenessProbe, web.Spec.Containers[0].StartupProbe = exec("ready"), exec("alive"), exec("started")
	job := newPod("job", ownedByJob)
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	plain := newPod("plain")
	e.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{web, job, plain}})
	steps(3)
	// A pod without probes is running and ready at once.
	if s, _ := e.PodStatus(plain.UID); s.Phase != corev1.PodRunning || !podReady(s) {
		t.Fatalf("plain: %s ready=%v %+v", s.Phase, podReady(s), s.ContainerStatuses)
	}
	clock.Step(time.Millisecond) // the init container completes, the Job's container exits
	steps(3)
	if js, _ := e.PodStatus(job.UID); js.Phase != corev1.PodSucceeded || js.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("job: %s %+v", js.Phase, js.ContainerStatuses)
	}
	// Probes pass at their first run: the sidecar's startup probe and the
	// app's probes one period (1s) later each.
	for range 2 {
		clock.Step(time.Second)
		steps(3)
	}
	s, _ := e.PodStatus(web.UID)
	if s.Phase != corev1.PodRunning || !podReady(s) {
		t.Fatalf("web: %s ready=%v %+v %+v", s.Phase, podReady(s), s.InitContainerStatuses, s.ContainerStatuses)
	}
	if i := s.InitContainerStatuses[0]; i.State.Terminated == nil || i.State.Terminated.ExitCode != 0 {
		t.Errorf("init: %+v", i.State)
	}
	if sc := s.InitContainerStatuses[1]; sc.State.Running == nil || !sc.Ready {
		t.Errorf("sidecar: %+v", sc)
	}
	if a := s.ContainerStatuses[0]; a.State.Running == nil || !a.Ready || a.Started == nil || !*a.Started {
		t.Errorf("app: %+v", a)
	}
	if cpu, mem := r.Usage(web, "app", time.Hour); cpu != 0 || mem != 0 {
		t.Errorf("usage %d %d", cpu, mem)
	}

	// Deleted: stopped at once (137), then forgotten.
	del := web.DeepCopy()
	now := metav1.NewTime(clock.Now())
	del.DeletionTimestamp = &now
	e.HandleUpdate(podsource.Update{Op: podsource.OpUpdate, Pods: []*corev1.Pod{del}})
	steps(3)
	if l, _ := e.PodLifecycle(web.UID); l != podsync.Done {
		t.Errorf("lifecycle after delete: %s", l)
	}
	s, _ = e.PodStatus(web.UID)
	for _, cs := range append(s.ContainerStatuses, s.InitContainerStatuses[1]) {
		if x := cs.State.Terminated; x == nil || x.ExitCode != 137 {
			t.Errorf("%s after delete: %+v", cs.Name, cs.State)
		}
	}
	if slices.Contains(b.Pods(), web.UID) {
		t.Errorf("the backend holds web after it was deleted: %v", b.Pods())
	}
}

func podReady(s corev1.PodStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// The cost of choosing a container's behaviour: the rules are matched in
// order on every call.
func BenchmarkRulesStages(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		var sb strings.Builder
		sb.WriteString("rules:\n")
		for i := range n - 1 {
			fmt.Fprintf(&sb, "- selector: {matchLabels: {app: web-%d}}\n  startDelay: 1s\n", i)
		}
		sb.WriteString("- selector: {matchLabels: {app: web}}\n  startDelay: 2s\n")
		r, err := podsynctest.ParseRules(strings.NewReader(sb.String()))
		if err != nil {
			b.Fatal(err)
		}
		pod := newPod("web-1", labelled("app", "web"), annotated(podsynctest.AnnotationReadinessDelay, "1s"))
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r.Stages(pod, "app").StartDelay != 2*time.Second {
					b.Fatal("wrong rule")
				}
			}
		})
	}
}

func TestCPUTime(t *testing.T) {
	r := parse(t, `
rules:
- selector: {containers: [up]}
  cpu: {from: 100m, to: 1100m, over: 10s}
- selector: {containers: [flat]}
  cpu: 250m
`)
	pod := newPod("p", withContainers("up", "flat", "none"))
	for _, tc := range []struct {
		container string
		since     time.Duration
		want      uint64 // nanoseconds of CPU
	}{
		{"up", -time.Second, 0},
		{"up", 0, 0},
		{"up", 2 * time.Second, 200_000_000 + 200_000_000},       // 0.1*2 + (1.0/10)*4/2 core-seconds
		{"up", 10 * time.Second, 6_000_000_000},                  // (0.1+1.1)/2*10
		{"up", 20 * time.Second, 6_000_000_000 + 11_000_000_000}, // then 1.1 cores for 10s
		{"flat", time.Minute, 15_000_000_000},
		{"none", time.Hour, 0},
	} {
		if got := r.CPUTime(pod, tc.container, tc.since); got != tc.want {
			t.Errorf("%s at %v: CPU time %d ns, want %d", tc.container, tc.since, got, tc.want)
		}
	}
	// A counter: it never goes down as time goes on.
	var last uint64
	for s := time.Duration(0); s <= 30*time.Second; s += 250 * time.Millisecond {
		got := r.CPUTime(pod, "up", s)
		if got < last {
			t.Fatalf("CPU time went down at %v: %d after %d", s, got, last)
		}
		last = got
	}
}
