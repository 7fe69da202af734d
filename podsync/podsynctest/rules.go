package podsynctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/nodekit/nodekit/probe"
)

// Bounds of a rules file, checked by ParseRules and LoadRules.
const (
	// MaxRulesBytes is the largest rules file read: 1 MiB.
	MaxRulesBytes = 1 << 20
	// MaxRules is the most rules a file may hold.
	MaxRules = 10000
)

// The pod annotations that override a pod's rule (or the default). Each
// applies to every container of the pod and takes the value syntax of the
// rule field of the same name: a duration ("2s"), an exit code ("1"), a
// message, or for cpu and memory a quantity ("250m") or a ramp
// ("{from: 10m, to: 200m, over: 5m}"). Any other annotation under
// sim.nodekit.io/ is an error, as is a value that does not parse.
const (
	AnnotationStartDelay        = "sim.nodekit.io/start-delay"
	AnnotationRunFor            = "sim.nodekit.io/run-for"
	AnnotationExitCode          = "sim.nodekit.io/exit-code"
	AnnotationStopExitCode      = "sim.nodekit.io/stop-exit-code"
	AnnotationFailCreate        = "sim.nodekit.io/fail-create"
	AnnotationReadinessDelay    = "sim.nodekit.io/readiness-delay"
	AnnotationLivenessFailAfter = "sim.nodekit.io/liveness-fail-after"
	AnnotationStartupDelay      = "sim.nodekit.io/startup-delay"
	AnnotationCPU               = "sim.nodekit.io/cpu"
	AnnotationMemory            = "sim.nodekit.io/memory"
)

const annotationPrefix = "sim.nodekit.io/"

// defaultStopExitCode is what a stopped container exits with unless a rule
// says otherwise: the Backend's default, SIGKILL's 128+9.
const defaultStopExitCode = 137

// promptly is how long a container that kwok's default stages complete at
// once (an init container, a Job's container) runs: the Backend needs a
// positive run time for a container to exit.
const promptly = time.Millisecond

// Rules choose each simulated container's behaviour: the first rule whose
// selector matches the pod and container, its fields over the default
// (kwok's default stages), with the pod's sim.nodekit.io/ annotations over
// both. Build Rules with ParseRules or LoadRules; a nil *Rules has no rules
// and gives every container the default. Rules are not changed once built
// and are safe for concurrent use.
type Rules struct {
	rules []rule
}

type rule struct {
	selector   labels.Selector // nil: every pod
	namespaces []string
	namePrefix string
	ownerKind  string
	containers []string
	patch      patch
}

// behaviour is everything a container does.
type behaviour struct {
	stages                                          Stages
	readinessDelay, livenessFailAfter, startupDelay time.Duration
	cpu, memory                                     ramp
}

// field marks the fields a rule or the annotations set.
type field uint16

const (
	fStartDelay field = 1 << iota
	fRunFor
	fExitCode
	fStopExitCode
	fFailCreate
	fReadinessDelay
	fLivenessFailAfter
	fStartupDelay
	fCPU
	fMemory
)

type patch struct {
	set field
	b   behaviour
}

func (p *patch) applyTo(b *behaviour) {
	if p.set&fStartDelay != 0 {
		b.stages.StartDelay = p.b.stages.StartDelay
	}
	if p.set&fRunFor != 0 {
		b.stages.RunFor = p.b.stages.RunFor
	}
	if p.set&fExitCode != 0 {
		b.stages.ExitCode = p.b.stages.ExitCode
	}
	if p.set&fStopExitCode != 0 {
		b.stages.StopExitCode = p.b.stages.StopExitCode
	}
	if p.set&fFailCreate != 0 {
		b.stages.FailCreate = p.b.stages.FailCreate
	}
	if p.set&fReadinessDelay != 0 {
		b.readinessDelay = p.b.readinessDelay
	}
	if p.set&fLivenessFailAfter != 0 {
		b.livenessFailAfter = p.b.livenessFailAfter
	}
	if p.set&fStartupDelay != 0 {
		b.startupDelay = p.b.startupDelay
	}
	if p.set&fCPU != 0 {
		b.cpu = p.b.cpu
	}
	if p.set&fMemory != 0 {
		b.memory = p.b.memory
	}
}

// ramp is a resource use going linearly from from to to over over (0: a
// constant from).
type ramp struct {
	from, to uint64
	over     time.Duration
}

func (r ramp) at(t time.Duration) uint64 {
	switch {
	case r.over <= 0 || t <= 0:
		return r.from
	case t >= r.over:
		return r.to
	case r.to >= r.from:
		return r.from + mulDiv(r.to-r.from, uint64(t), uint64(r.over))
	default:
		return r.from - mulDiv(r.from-r.to, uint64(t), uint64(r.over))
	}
}

// integral is the area under the ramp from 0 to t: for a CPU ramp in
// nanocores, the CPU time in nanoseconds.
func (r ramp) integral(t time.Duration) uint64 {
	if t <= 0 {
		return 0
	}
	sec := t.Seconds()
	from, to := float64(r.from), float64(r.to)
	if r.over <= 0 {
		return uint64(from * sec)
	}
	over := r.over.Seconds()
	if sec <= over {
		return uint64(from*sec + (to-from)*sec*sec/(2*over))
	}
	return uint64((from+to)*over/2 + to*(sec-over))
}

// mulDiv returns a*b/c without overflow for b < c.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// LoadRules reads a rules file (YAML or JSON) with ParseRules.
func LoadRules(path string) (*Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("podsynctest: rules: %w", err)
	}
	defer f.Close()
	r, err := ParseRules(f)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return r, nil
}

// ParseRules reads rules in YAML or JSON (see the package documentation for
// the format). Decoding is strict: an unknown field, a duplicate key or a
// value that does not parse is an error naming the rule (by index) and the
// field. Input over MaxRulesBytes or with more than MaxRules rules is
// refused. Empty input is no rules.
func ParseRules(r io.Reader) (*Rules, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxRulesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("podsynctest: rules: %w", err)
	}
	if len(data) > MaxRulesBytes {
		return nil, fmt.Errorf("podsynctest: rules: input is larger than %d bytes (1 MiB)", MaxRulesBytes)
	}
	js, err := rulesJSON(data)
	if err != nil {
		return nil, fmt.Errorf("podsynctest: rules: %w", err)
	}
	var file struct {
		Rules []json.RawMessage `json:"rules"`
	}
	if err := decodeStrict(js, &file); err != nil {
		return nil, fmt.Errorf("podsynctest: rules: %w", err)
	}
	if len(file.Rules) > MaxRules {
		return nil, fmt.Errorf("podsynctest: rules: %d rules, more than the %d allowed", len(file.Rules), MaxRules)
	}
	out := &Rules{rules: make([]rule, 0, len(file.Rules))}
	for i, raw := range file.Rules {
		ru, err := compileRule(raw)
		if err != nil {
			return nil, fmt.Errorf("podsynctest: rules[%d]%w", i, err)
		}
		out.rules = append(out.rules, ru)
	}
	return out, nil
}

// maxRulesJSONBytes bounds the JSON that a rules file's YAML converts to,
// which YAML aliases can make much larger than the file.
const maxRulesJSONBytes = 8 * MaxRulesBytes

func rulesJSON(data []byte) (js []byte, err error) {
	defer func() {
		// Whatever the input, the YAML parser must not take the process down.
		if r := recover(); r != nil {
			js, err = nil, fmt.Errorf("YAML parser failed: %v", r)
		}
	}()
	if js, err = yaml.YAMLToJSONStrict(data); err != nil {
		return nil, err
	}
	if len(js) > maxRulesJSONBytes {
		return nil, fmt.Errorf("the rules expand to %d bytes of JSON through YAML aliases, more than %d", len(js), maxRulesJSONBytes)
	}
	// The conversion reads the first YAML document only: refuse others
	// rather than drop them.
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yamlv3.Node
		switch err := dec.Decode(&doc); {
		case err == io.EOF:
			return js, nil
		case err != nil:
			return nil, err
		case i > 0 && !emptyDocument(&doc):
			return nil, fmt.Errorf("more than one YAML document (another begins at line %d)", doc.Line)
		}
	}
}

func emptyDocument(doc *yamlv3.Node) bool {
	return len(doc.Content) == 0 || (len(doc.Content) == 1 && doc.Content[0].Kind == yamlv3.ScalarNode && doc.Content[0].Tag == "!!null")
}

// Len returns how many rules there are (0 for a nil *Rules).
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return len(r.rules)
}

type rawRule struct {
	Name              string          `json:"name"`
	Selector          json.RawMessage `json:"selector"`
	StartDelay        json.RawMessage `json:"startDelay"`
	RunFor            json.RawMessage `json:"runFor"`
	ExitCode          *int32          `json:"exitCode"`
	StopExitCode      *int32          `json:"stopExitCode"`
	FailCreate        *string         `json:"failCreate"`
	ReadinessDelay    json.RawMessage `json:"readinessDelay"`
	LivenessFailAfter json.RawMessage `json:"livenessFailAfter"`
	StartupDelay      json.RawMessage `json:"startupDelay"`
	CPU               json.RawMessage `json:"cpu"`
	Memory            json.RawMessage `json:"memory"`
}

type rawSelector struct {
	metav1.LabelSelector
	Namespaces []string `json:"namespaces"`
	NamePrefix string   `json:"namePrefix"`
	OwnerKind  string   `json:"ownerKind"`
	Containers []string `json:"containers"`
}

// compileRule compiles one rule; its errors start with what follows the
// rule's index (": field: problem").
func compileRule(raw json.RawMessage) (rule, error) {
	var rr rawRule
	if err := decodeStrict(raw, &rr); err != nil {
		return rule{}, fmt.Errorf(": %w", err)
	}
	ru, err := rr.compile()
	if err != nil && rr.Name != "" {
		return rule{}, fmt.Errorf(" (%s)%w", rr.Name, err)
	}
	return ru, err
}

func (rr *rawRule) compile() (rule, error) {
	var ru rule
	if !isNull(rr.Selector) {
		var s rawSelector
		if err := decodeStrict(rr.Selector, &s); err != nil {
			return rule{}, fmt.Errorf(": selector: %w", err)
		}
		if len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0 {
			sel, err := metav1.LabelSelectorAsSelector(&s.LabelSelector)
			if err != nil {
				return rule{}, fmt.Errorf(": selector: %w", err)
			}
			ru.selector = sel
		}
		for _, l := range []struct {
			name string
			vals []string
		}{{"namespaces", s.Namespaces}, {"containers", s.Containers}} {
			if slices.Contains(l.vals, "") {
				return rule{}, fmt.Errorf(": selector.%s: an empty name", l.name)
			}
		}
		ru.namespaces, ru.namePrefix, ru.ownerKind, ru.containers = s.Namespaces, s.NamePrefix, s.OwnerKind, s.Containers
	}
	p := &ru.patch
	durations := []struct {
		name string
		raw  json.RawMessage
		f    field
		dst  *time.Duration
	}{
		{"startDelay", rr.StartDelay, fStartDelay, &p.b.stages.StartDelay},
		{"runFor", rr.RunFor, fRunFor, &p.b.stages.RunFor},
		{"readinessDelay", rr.ReadinessDelay, fReadinessDelay, &p.b.readinessDelay},
		{"livenessFailAfter", rr.LivenessFailAfter, fLivenessFailAfter, &p.b.livenessFailAfter},
		{"startupDelay", rr.StartupDelay, fStartupDelay, &p.b.startupDelay},
	}
	for _, d := range durations {
		if isNull(d.raw) {
			continue
		}
		v, err := parseDurationJSON(d.raw)
		if err != nil {
			return rule{}, fmt.Errorf(": %s: %w", d.name, err)
		}
		*d.dst, p.set = v, p.set|d.f
	}
	if rr.ExitCode != nil {
		p.b.stages.ExitCode, p.set = *rr.ExitCode, p.set|fExitCode
	}
	if rr.StopExitCode != nil {
		p.b.stages.StopExitCode, p.set = *rr.StopExitCode, p.set|fStopExitCode
	}
	if rr.FailCreate != nil {
		p.b.stages.FailCreate, p.set = *rr.FailCreate, p.set|fFailCreate
	}
	for _, q := range []struct {
		kind resourceKind
		raw  json.RawMessage
		f    field
		dst  *ramp
	}{{cpuKind, rr.CPU, fCPU, &p.b.cpu}, {memoryKind, rr.Memory, fMemory, &p.b.memory}} {
		if isNull(q.raw) {
			continue
		}
		v, err := parseRamp(q.raw, q.kind)
		if err != nil {
			return rule{}, fmt.Errorf(": %s%w", q.kind, err)
		}
		*q.dst, p.set = v, p.set|q.f
	}
	return ru, nil
}

func (ru *rule) matches(pod *corev1.Pod, container string) bool {
	if len(ru.containers) > 0 && !slices.Contains(ru.containers, container) {
		return false
	}
	if len(ru.namespaces) > 0 && !slices.Contains(ru.namespaces, pod.Namespace) {
		return false
	}
	if !strings.HasPrefix(pod.Name, ru.namePrefix) {
		return false
	}
	if ru.ownerKind != "" && !ownedBy(pod, ru.ownerKind) {
		return false
	}
	return ru.selector == nil || ru.selector.Matches(labels.Set(pod.Labels))
}

func ownedBy(pod *corev1.Pod, kind string) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == kind {
			return true
		}
	}
	return false
}

// defaultBehaviour is kwok's default stages for the container: running at
// once, probes passing at once, stopped with 137; an init container (not a
// sidecar) and the containers of a Job's pod complete (exit 0) promptly.
func defaultBehaviour(pod *corev1.Pod, container string) behaviour {
	b := behaviour{stages: Stages{StopExitCode: defaultStopExitCode}}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == container {
			if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				b.stages.RunFor = promptly
			}
			return b
		}
	}
	if ownedBy(pod, "Job") && slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == container }) {
		b.stages.RunFor = promptly
	}
	return b
}

// resolve returns the container's behaviour: the default, the first
// matching rule over it, the pod's annotations over both. The error names
// every bad annotation; the behaviour then has the good ones only.
func (r *Rules) resolve(pod *corev1.Pod, container string) (behaviour, error) {
	b := defaultBehaviour(pod, container)
	if r != nil {
		for i := range r.rules {
			if r.rules[i].matches(pod, container) {
				r.rules[i].patch.applyTo(&b)
				break
			}
		}
	}
	p, err := annotationPatch(pod.Annotations)
	p.applyTo(&b)
	return b, err
}

type annotation struct {
	key string
	f   field
}

var annotations = []annotation{
	{AnnotationStartDelay, fStartDelay},
	{AnnotationRunFor, fRunFor},
	{AnnotationExitCode, fExitCode},
	{AnnotationStopExitCode, fStopExitCode},
	{AnnotationFailCreate, fFailCreate},
	{AnnotationReadinessDelay, fReadinessDelay},
	{AnnotationLivenessFailAfter, fLivenessFailAfter},
	{AnnotationStartupDelay, fStartupDelay},
	{AnnotationCPU, fCPU},
	{AnnotationMemory, fMemory},
}

// annotationPatch parses the sim.nodekit.io/ annotations.
func annotationPatch(ann map[string]string) (patch, error) {
	var p patch
	var errs []string
	for k := range ann {
		if strings.HasPrefix(k, annotationPrefix) && !slices.ContainsFunc(annotations, func(a annotation) bool { return a.key == k }) {
			errs = append(errs, fmt.Sprintf("unknown annotation %s", k))
		}
	}
	slices.Sort(errs)
	for _, a := range annotations {
		v, ok := ann[a.key]
		if !ok {
			continue
		}
		if err := p.setAnnotation(a.f, v); err != nil {
			errs = append(errs, fmt.Sprintf("invalid annotation %s=%s: %v", a.key, short(strconv.Quote(v)), err))
			continue
		}
		p.set |= a.f
	}
	if len(errs) > 0 {
		return p, errors.New(strings.Join(errs, "; "))
	}
	return p, nil
}

func (p *patch) setAnnotation(f field, v string) error {
	var err error
	switch f {
	case fStartDelay:
		p.b.stages.StartDelay, err = parseDuration(v)
	case fRunFor:
		p.b.stages.RunFor, err = parseDuration(v)
	case fReadinessDelay:
		p.b.readinessDelay, err = parseDuration(v)
	case fLivenessFailAfter:
		p.b.livenessFailAfter, err = parseDuration(v)
	case fStartupDelay:
		p.b.startupDelay, err = parseDuration(v)
	case fExitCode:
		p.b.stages.ExitCode, err = parseExitCode(v)
	case fStopExitCode:
		p.b.stages.StopExitCode, err = parseExitCode(v)
	case fFailCreate:
		p.b.stages.FailCreate = v
	case fCPU, fMemory:
		kind, dst := cpuKind, &p.b.cpu
		if f == fMemory {
			kind, dst = memoryKind, &p.b.memory
		}
		if strings.TrimSpace(v) == "" {
			return errors.New("want a quantity or a ramp, got nothing")
		}
		var js []byte
		if js, err = yaml.YAMLToJSONStrict([]byte(v)); err == nil {
			*dst, err = parseRamp(js, kind)
		}
		if err != nil {
			err = errors.New(strings.TrimLeft(err.Error(), ":. "))
		}
	}
	return err
}

func parseExitCode(v string) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("want an exit code (a 32-bit integer)")
	}
	return int32(n), nil
}

// Stages returns how the pod's container behaves: its rule's stages over
// the default, with the pod's annotations over both. It is meant as
// Options.Stages. A pod whose sim.nodekit.io/ annotations do not parse
// fails to create its containers (FailCreate, a CreateContainerError)
// with a message naming each bad annotation.
func (r *Rules) Stages(pod *corev1.Pod, container string) Stages {
	b, err := r.resolve(pod, container)
	if err != nil {
		b.stages.FailCreate = err.Error()
	}
	return b.stages
}

// Usage returns the CPU (in nanocores) and memory (in bytes) the pod's
// container uses at since after it started, by its rule and annotations: a
// constant, or a linear ramp reaching its end value at the ramp's length.
// Without a rule or annotation a container uses nothing. A container whose
// annotations do not parse (see Stages) uses nothing.
func (r *Rules) Usage(pod *corev1.Pod, container string, since time.Duration) (cpuNanoCores, memoryBytes uint64) {
	b, err := r.resolve(pod, container)
	if err != nil {
		return 0, 0
	}
	return b.cpu.at(since), b.memory.at(since)
}

// CPUTime returns the CPU time, in nanoseconds, the pod's container has
// used by since after it started: the integral of its CPU use (Usage) over
// that time, so that it grows as a counter does. A container without a CPU
// rule, or whose annotations do not parse, has used none.
func (r *Rules) CPUTime(pod *corev1.Pod, container string, since time.Duration) uint64 {
	b, err := r.resolve(pod, container)
	if err != nil {
		return 0
	}
	return b.cpu.integral(since)
}

// ProberOptions configure Rules.Prober. The zero value of each field means
// its default.
type ProberOptions struct {
	// StartedAt returns when the pod's container with the runtime ID
	// containerID (bare or "<runtime>://<id>", as in probe.Target) started,
	// false if it has not. Required: the Backend's StartedAt method.
	StartedAt func(pod types.UID, containerID string) (time.Time, bool)
	// Clock is what the time since a container started is read from: the
	// Backend's clock. Default clock.RealClock{}.
	Clock clock.PassiveClock
}

// Prober returns a probe.Prober whose outcomes follow the rules, measured
// from the container's start (o.StartedAt) on o.Clock: a startup probe
// fails until startupDelay after the start and passes from then on, a
// readiness probe likewise with readinessDelay, and a liveness probe
// passes until livenessFailAfter after the start (0: for ever) and fails
// from then on. The probe's kind is found by comparing the spec with the
// target container's probes; a spec that two or three of them share is
// one simulated endpoint, which passes only when each of their rules
// passes. A target without a pod or container, a spec that is none of
// the container's probes, a container not started or bad annotations
// are an Outcome with Err.
func (r *Rules) Prober(o ProberOptions) (probe.Prober, error) {
	if o.StartedAt == nil {
		return nil, errors.New("podsynctest: ProberOptions.StartedAt is required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &rulesProber{r: r, o: o}, nil
}

type rulesProber struct {
	r *Rules
	o ProberOptions
}

var _ probe.Prober = (*rulesProber)(nil)

func (p *rulesProber) Probe(_ context.Context, spec *corev1.Probe, t probe.Target) probe.Outcome {
	if t.Pod == nil || t.Container == nil {
		return probe.Outcome{Err: errors.New("simulated probe: the target has no pod or container")}
	}
	kinds := probeKinds(spec, t.Container)
	if len(kinds) == 0 {
		return probe.Outcome{Err: fmt.Errorf("simulated probe: the spec is none of container %s's probes", t.Container.Name)}
	}
	b, err := p.r.resolve(t.Pod, t.Container.Name)
	if err != nil {
		return probe.Outcome{Err: fmt.Errorf("simulated probe: %v", err)}
	}
	start, ok := p.o.StartedAt(t.Pod.UID, t.ContainerID)
	if !ok {
		return probe.Outcome{Err: fmt.Errorf("simulated probe: container %s (%s) has not started", t.Container.Name, t.ContainerID)}
	}
	since := p.o.Clock.Since(start)
	for _, k := range kinds {
		switch k {
		case probe.Startup:
			if since < b.startupDelay {
				return failure("startup probe passes %v after the container started, %v so far", b.startupDelay, since)
			}
		case probe.Readiness:
			if since < b.readinessDelay {
				return failure("readiness probe passes %v after the container started, %v so far", b.readinessDelay, since)
			}
		case probe.Liveness:
			if b.livenessFailAfter > 0 && since >= b.livenessFailAfter {
				return failure("liveness probe fails from %v after the container started", b.livenessFailAfter)
			}
		}
	}
	return probe.Outcome{Result: probe.Success}
}

func failure(format string, args ...any) probe.Outcome {
	return probe.Outcome{Result: probe.Failure, Message: "simulated: " + fmt.Sprintf(format, args...)}
}

// probeKinds returns the kinds of c's probes that spec is: the same
// probe, or the same with probe.Defaults applied (what probe.Manager runs).
func probeKinds(spec *corev1.Probe, c *corev1.Container) []probe.Type {
	if spec == nil {
		return nil
	}
	var out []probe.Type
	for _, k := range []struct {
		t probe.Type
		p *corev1.Probe
	}{{probe.Startup, c.StartupProbe}, {probe.Readiness, c.ReadinessProbe}, {probe.Liveness, c.LivenessProbe}} {
		if k.p != nil && (k.p == spec || reflect.DeepEqual(k.p, spec) || reflect.DeepEqual(probe.Defaults(k.p), spec)) {
			out = append(out, k.t)
		}
	}
	return out
}

// decodeStrict decodes one JSON value into v, refusing unknown fields, with
// errors that name the field.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return fmt.Errorf("want an object, got %s", te.Value)
			}
			return fmt.Errorf("%s: want %s, got %s", te.Field, typeName(te.Type), te.Value)
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errors.New("more than one value")
	}
	return nil
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a map"
	case reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Int32:
		return "a 32-bit integer"
	}
	return t.String()
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func short(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:61], "") + "..."
	}
	return s
}

func parseDurationJSON(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("want a duration string such as \"5s\", got %s", short(string(raw)))
	}
	return parseDuration(s)
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New(strings.TrimPrefix(err.Error(), "time: "))
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %s", short(strconv.Quote(s)))
	}
	return d, nil
}

type resourceKind string

const (
	cpuKind    resourceKind = "cpu"
	memoryKind resourceKind = "memory"
)

var (
	maxCPU    = resource.NewQuantity(1_000_000, resource.DecimalSI) // cores
	maxMemory = resource.NewQuantity(1<<60, resource.BinarySI)      // 1 EiB
)

// parseRamp parses a quantity or {from, to, over}; its errors start with
// what follows the field's name (": problem" or ".from: problem").
func parseRamp(raw json.RawMessage, kind resourceKind) (ramp, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		v, err := parseQuantity(raw, kind)
		if err != nil {
			return ramp{}, fmt.Errorf(": %w", err)
		}
		return ramp{from: v, to: v}, nil
	}
	var rr struct {
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
		Over json.RawMessage `json:"over"`
	}
	if err := decodeStrict(raw, &rr); err != nil {
		return ramp{}, fmt.Errorf(": %w", err)
	}
	if isNull(rr.From) {
		return ramp{}, errors.New(".from: required")
	}
	from, err := parseQuantity(rr.From, kind)
	if err != nil {
		return ramp{}, fmt.Errorf(".from: %w", err)
	}
	out := ramp{from: from, to: from}
	switch {
	case isNull(rr.To) && isNull(rr.Over):
		return out, nil
	case isNull(rr.To):
		return ramp{}, errors.New(".to: required with over")
	case isNull(rr.Over):
		return ramp{}, errors.New(".over: required with to")
	}
	if out.to, err = parseQuantity(rr.To, kind); err != nil {
		return ramp{}, fmt.Errorf(".to: %w", err)
	}
	if out.over, err = parseDurationJSON(rr.Over); err != nil {
		return ramp{}, fmt.Errorf(".over: %w", err)
	}
	if out.over == 0 {
		return ramp{}, errors.New(".over: must be more than 0")
	}
	return out, nil
}

// parseQuantity parses a JSON string or number as a quantity: CPU in
// nanocores, memory in bytes.
func parseQuantity(raw json.RawMessage, kind resourceKind) (uint64, error) {
	s := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("want a quantity such as %s, got %s", map[resourceKind]string{cpuKind: `"250m"`, memoryKind: `"64Mi"`}[kind], short(strconv.Quote(s)))
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("negative quantity %s", q.String())
	}
	if kind == cpuKind {
		if q.Cmp(*maxCPU) > 0 {
			return 0, fmt.Errorf("%s is more than %s cores", q.String(), maxCPU.String())
		}
		return uint64(q.ScaledValue(resource.Nano)), nil
	}
	if q.Cmp(*maxMemory) > 0 {
		return 0, fmt.Errorf("%s is more than %s", q.String(), maxMemory.String())
	}
	return uint64(q.Value()), nil
}
