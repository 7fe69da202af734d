package probe

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// worker is the state of one probe of one container. The manager's mutex
// guards the scheduling and published fields; the probing fields belong to
// the pool goroutine running it (only one at a time: running).
type worker struct {
	m         *Manager
	key       workerKey
	pod       *corev1.Pod
	container *corev1.Container
	spec      *corev1.Probe // with defaults
	period    time.Duration
	initial   Result
	init      bool // a restartable init container
	ref       *corev1.ObjectReference

	// scheduling (m.mu)
	next      time.Time
	running   bool
	retrigger bool // triggered while running: due again at once after the run
	retry     bool // due from soon (a readiness retry): a failure records no event
	removed   bool
	cancel    context.CancelFunc

	// published result (m.mu)
	hasPub bool
	pubID  string
	pub    Result
	pubMsg string

	// probing state (the running goroutine)
	containerID string
	onHold      bool
	lastResult  Result
	resultRun   int
	everReady   bool          // readiness: Success published for containerID
	soon        time.Duration // set by a round: the next is due this soon, if sooner than a period

	// metrics children, nil without a Registerer
	mSuccess, mFailure, mUnknown prometheus.Counter
	mDuration                    prometheus.Observer
}

func newWorker(m *Manager, k workerKey, pod *corev1.Pod, c *corev1.Container, spec *corev1.Probe, init bool) *worker {
	w := &worker{
		m:         m,
		key:       k,
		pod:       pod,
		container: c.DeepCopy(),
		spec:      Defaults(spec),
		init:      init,
	}
	w.period = time.Duration(w.spec.PeriodSeconds) * time.Second
	switch k.typ {
	case Liveness:
		w.initial = Success
	case Readiness:
		w.initial = Failure
	default:
		w.initial = Unknown
	}
	field := "spec.containers{" + c.Name + "}"
	if init {
		field = "spec.initContainers{" + c.Name + "}"
	}
	w.ref = &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1",
		Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		FieldPath: field,
	}
	m.metrics.bind(w)
	return w
}

func (w *worker) update() Update {
	return Update{
		PodUID: w.key.uid, ContainerName: w.key.name, ContainerID: w.pubID,
		Type: w.key.typ, Result: w.pub, Message: w.pubMsg,
	}
}

// doProbe is one round of the worker, kubelet's rules in order. It returns
// false when the worker should stop for good.
func (m *Manager) doProbe(ctx context.Context, w *worker) (keep bool) {
	defer func() {
		if r := recover(); r != nil {
			workerLogger(ctx, w).Error(fmt.Errorf("%w: %v", ErrPanic, r), "Probe worker panicked")
			keep = true
		}
	}()
	start := m.clock.Now()
	w.soon = 0

	m.mu.Lock()
	pe := m.pods[w.key.uid]
	if pe == nil || !pe.hasStatus {
		m.mu.Unlock()
		return true // no status yet
	}
	if pe.phase == corev1.PodFailed || pe.phase == corev1.PodSucceeded {
		m.mu.Unlock()
		return false // the pod is done
	}
	c, ok := pe.cs[w.key.name]
	if !ok || c.id == "" {
		m.mu.Unlock()
		return true // no container yet
	}
	podIP := pe.ip
	quiet := w.retry
	pod := w.pod
	if pe.pod != nil {
		pod = pe.pod
	}
	deleting := pod.DeletionTimestamp != nil
	restartPolicy := pod.Spec.RestartPolicy
	started := m.startedLocked(w.key.uid, w.key.name, c)
	m.mu.Unlock()

	if w.containerID != c.id {
		w.containerID = c.id
		// A container that ran since before the manager started keeps no
		// initial result, so an agent restart does not flip Ready.
		restarted := c.running && !c.startedAt.IsZero() && c.startedAt.Before(m.start.Add(-restartGrace))
		seeded := false
		if w.init && w.key.typ == Startup && c.started {
			m.setResult(ctx, w, c.id, Success, "")
			seeded = true
		}
		w.everReady = false
		switch {
		case w.key.typ == Readiness && m.keepsReady(pod, c):
			// kubelet keeps a container that was ready before the agent
			// restarted ready until its probe says otherwise.
			m.setResult(ctx, w, c.id, Success, "")
			w.everReady = true
		case !restarted:
			m.setResult(ctx, w, c.id, w.initial, "")
		case !seeded:
			m.clearResult(w)
		}
		w.onHold = false // a new container: probe again
	}
	if w.onHold {
		return true
	}
	if !c.running {
		m.setResult(ctx, w, c.id, Failure, "container is not running")
		if !c.terminated {
			return true
		}
		return w.init || shouldRestart(w.container, restartPolicy, c.exitCode)
	}
	if deleting && (w.key.typ == Liveness || w.key.typ == Startup) {
		// The pod is shutting down: quiet success, and no more probing.
		m.setResult(ctx, w, c.id, Success, "")
		return false
	}
	if !c.startedAt.IsZero() && int32(m.clock.Since(c.startedAt)/time.Second) < w.spec.InitialDelaySeconds {
		return true
	}
	if w.key.typ == Startup && started {
		return true // started: the startup probe has done its job
	}
	if w.key.typ != Startup && !started {
		return true // liveness and readiness wait for the startup probe
	}

	out := m.runProbe(ctx, w, Target{Pod: pod, Container: w.container, ContainerID: c.id, PodIP: podIP}, quiet)
	if ctx.Err() != nil {
		return true // cancelled (worker removed, manager stopping): no verdict
	}
	if out.Err != nil {
		w.mUnknown.Inc()
		w.mDuration.Observe(m.clock.Since(start).Seconds())
		return true // an error is no verdict: keep the result as it is
	}
	r := out.Result
	if r != Success {
		r = Failure
	}
	if r == Success {
		w.mSuccess.Inc()
	} else {
		w.mFailure.Inc()
	}
	w.mDuration.Observe(m.clock.Since(start).Seconds())
	if w.key.typ == Readiness && r == Failure && !w.everReady && !c.startedAt.IsZero() {
		// Not ready yet, and the container started less than a period ago:
		// probe again when its age has doubled (at least readinessRetry).
		if age := c.age(m.clock.Now()); age < w.period {
			w.soon = max(readinessRetry, age)
		}
	}
	if w.lastResult == r {
		w.resultRun++
	} else {
		w.lastResult = r
		w.resultRun = 1
	}
	if (r == Failure && w.resultRun < int(w.spec.FailureThreshold)) ||
		(r == Success && w.resultRun < int(w.spec.SuccessThreshold)) {
		return true
	}
	m.setResult(ctx, w, c.id, r, out.Message)
	if w.key.typ == Readiness && r == Success {
		w.everReady = true
	}
	if (w.key.typ == Liveness && r == Failure) || w.key.typ == Startup {
		// The container is to be restarted (liveness failure, startup
		// failure) or started (startup success): no more probes of it.
		w.onHold = true
		w.resultRun = 0
	}
	return true
}

// runProbe runs the prober, retrying an outcome with Err up to
// maxErrorRetries times, and records events for what it found (quiet: not
// for a failure).
func (m *Manager) runProbe(ctx context.Context, w *worker, target Target, quiet bool) Outcome {
	var out Outcome
	for i := 0; i < maxErrorRetries; i++ {
		out = m.safeProbe(ctx, w.spec, target)
		if out.Err == nil || ctx.Err() != nil {
			break
		}
	}
	out.Message = truncate(out.Message)
	if ctx.Err() != nil {
		return out // cancelled: the caller discards it
	}
	switch {
	case out.Err != nil:
		workerLogger(ctx, w).V(1).Info("Probe errored", "err", out.Err)
		m.event(w, "Unhealthy", "%s probe errored and resulted in unknown state: %v", w.key.typ, out.Err)
	case out.Result == Success && out.Warning:
		m.event(w, "ProbeWarning", "%s probe warning: %s", w.key.typ, out.Message)
	case out.Result == Success:
	default:
		workerLogger(ctx, w).V(1).Info("Probe failed", "result", out.Result, "output", out.Message)
		if !quiet {
			m.event(w, "Unhealthy", "%s probe failed: %s", w.key.typ, out.Message)
		}
	}
	return out
}

// safeProbe calls the prober, turning a panic into an Outcome with Err.
func (m *Manager) safeProbe(ctx context.Context, spec *corev1.Probe, target Target) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = panicOutcome(r)
		}
	}()
	return m.prober.Probe(ctx, spec, target)
}

func (m *Manager) event(w *worker, reason, format string, args ...any) {
	if m.recorder == nil {
		return
	}
	m.recorder.Eventf(w.ref, corev1.EventTypeWarning, reason, format, args...)
}

// shouldRestart reports whether a container that exited with code will be
// restarted, from its own restart policy and rules or else the pod's.
func shouldRestart(c *corev1.Container, podPolicy corev1.RestartPolicy, code int32) bool {
	if c.RestartPolicy != nil {
		for _, rule := range c.RestartPolicyRules {
			if rule.ExitCodes == nil {
				continue
			}
			in := false
			for _, v := range rule.ExitCodes.Values {
				if v == code {
					in = true
					break
				}
			}
			matched := (rule.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpIn && in) ||
				(rule.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpNotIn && !in)
			if matched && rule.Action == corev1.ContainerRestartRuleActionRestart {
				return true
			}
			if matched {
				break
			}
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return code != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch podPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}
