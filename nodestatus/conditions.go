package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/pressure"
)

// SetCondition writes c into node's conditions with kubelet's bookkeeping:
// the condition of c.Type is replaced (or appended when there is none);
// lastHeartbeatTime becomes now; lastTransitionTime becomes now when the
// condition is new or its status changed, and is kept otherwise; reason and
// message are c's. Conditions of other types are not touched. It reports
// whether the status changed from an existing condition's.
func SetCondition(node *corev1.Node, c corev1.NodeCondition, now metav1.Time) (changed bool) {
	c.LastHeartbeatTime = now
	for i := range node.Status.Conditions {
		old := &node.Status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && !old.LastTransitionTime.IsZero() {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = now
			changed = old.Status != c.Status
		}
		*old = c
		return changed
	}
	c.LastTransitionTime = now
	node.Status.Conditions = append(node.Status.Conditions, c)
	return false
}

// pressureSetter owns one pressure condition. The condition is True while
// one of its thresholds is met, and stays True until none has been met for
// the transition period, as kubelet's eviction manager decides. A threshold
// whose host fact is missing is skipped, as kubelet skips a signal it has no
// observation for, and the setter returns the fact's error.
type pressureSetter struct {
	spec       pressure.Condition // kubelet's wording
	src        *sources
	clock      clock.PassiveClock
	period     time.Duration
	thresholds thresholds

	mu           sync.Mutex
	lastObserved time.Time // when pressure was last seen; zero: never
}

func (p *pressureSetter) SetStatus(ctx context.Context, node *corev1.Node) error {
	var errs []error
	met := false
	if len(p.thresholds) > 0 {
		facts, err := p.src.facts(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			for i := range p.thresholds {
				on, err := p.thresholds[i].met(facts)
				if err != nil && !slices.ContainsFunc(p.thresholds[:i], func(t threshold) bool { return t.fact == p.thresholds[i].fact }) {
					errs = append(errs, err) // once per fact
				}
				met = met || on
			}
		}
	}
	now := passNow(ctx, p.clock)
	p.mu.Lock()
	if met {
		p.lastObserved = now
	}
	under := pressure.Under(p.lastObserved, now, p.period)
	p.mu.Unlock()

	c := corev1.NodeCondition{Type: p.spec.Type, Status: corev1.ConditionFalse, Reason: p.spec.FalseReason, Message: p.spec.FalseMessage}
	event := p.spec.FalseEvent
	if under {
		c.Status, c.Reason, c.Message, event = corev1.ConditionTrue, p.spec.TrueReason, p.spec.TrueMessage, p.spec.TrueEvent
	}
	prev := findCondition(node, p.spec.Type)
	SetCondition(node, c, metav1.NewTime(now))
	if prev != c.Status {
		p.src.event(node, corev1.EventTypeNormal, event, "Node %s status is now: %s", node.Name, event)
	}
	return errors.Join(errs...)
}

func (p *pressureSetter) passClock() clock.PassiveClock { return p.clock }

func findCondition(node *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return node.Status.Conditions[i].Status
		}
	}
	return ""
}

// DefaultRuntimeDownAfter is Options.RuntimeDownAfter's default: how long
// the Ready setter waits, after the last time the runtime's status check
// succeeded with RuntimeReady true, before it reports "container runtime is
// down", kubelet's fixed maxWaitForContainerRuntime.
const DefaultRuntimeDownAfter = 30 * time.Second

// ready owns the Ready condition; it runs after the setters whose results it
// reads (capacity). Like kubelet's runtime state, it remembers the last good
// runtime status check: a failed check keeps what the last answer said, and
// only when no check has been good for downAfter is the runtime down.
type ready struct {
	src          *sources
	clock        clock.PassiveClock
	healthChecks []HealthCheck
	downAfter    time.Duration

	mu         sync.Mutex
	lastGood   time.Time // last status check that said RuntimeReady; zero: none yet
	runtimeErr error     // what the last answered check said of the runtime
	networkErr error     // and of the network
}

func (r *ready) passClock() clock.PassiveClock { return r.clock }

// runtimeErrors updates the runtime state from this pass's status check and
// returns the runtime's and the network's errors, as kubelet words them, and
// the check's own failure.
func (r *ready) runtimeErrors(ctx context.Context, now time.Time) (runtimeErrs, networkErrs []error, checkErr error) {
	st, at, err := r.src.statusAt(ctx, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		checkErr = fmt.Errorf("container runtime status check: %w", err)
	} else {
		r.networkErr, r.runtimeErr = nil, nil
		if c := runtimeCondition(st.Status, runtimeapi.NetworkReady); c == nil || !c.Status {
			r.networkErr = fmt.Errorf("container runtime network not ready: %s", formatRuntimeCondition(c))
		}
		if c := runtimeCondition(st.Status, runtimeapi.RuntimeReady); c == nil || !c.Status {
			r.runtimeErr = fmt.Errorf("container runtime not ready: %s", formatRuntimeCondition(c))
		} else if at.After(r.lastGood) {
			r.lastGood = at
		}
	}
	switch {
	case r.lastGood.IsZero():
		runtimeErrs = append(runtimeErrs, errors.New("container runtime status check may not have completed yet"))
	case !r.lastGood.Add(r.downAfter).After(now):
		runtimeErrs = append(runtimeErrs, errors.New("container runtime is down"))
	}
	for _, hc := range r.healthChecks {
		if err := hc.Check(ctx); err != nil {
			runtimeErrs = append(runtimeErrs, fmt.Errorf("%s is not healthy: %w", hc.Name, err))
		}
	}
	if r.runtimeErr != nil {
		runtimeErrs = append(runtimeErrs, r.runtimeErr)
	}
	if r.networkErr != nil {
		networkErrs = append(networkErrs, r.networkErr)
	}
	return runtimeErrs, networkErrs, checkErr
}

var requiredCapacity = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}

func (r *ready) SetStatus(ctx context.Context, node *corev1.Node) error {
	now := passNow(ctx, r.clock)
	runtimeErrs, networkErrs, checkErr := r.runtimeErrors(ctx, now)
	var missing []string
	for _, name := range requiredCapacity {
		if _, ok := node.Status.Capacity[name]; !ok {
			missing = append(missing, string(name))
		}
	}
	var missingErr error
	if len(missing) > 0 {
		missingErr = fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", "))
	}

	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if agg := utilerrors.NewAggregate([]error{
		aggregate(runtimeErrs), aggregate(networkErrs), missingErr,
	}); agg != nil {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", agg.Error()
	}
	if SetCondition(node, c, metav1.NewTime(now)) {
		if c.Status == corev1.ConditionTrue {
			r.src.event(node, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: %s", node.Name, "NodeReady")
		} else {
			r.src.event(node, corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: %s", node.Name, "NodeNotReady")
		}
	}
	return checkErr
}

// aggregate is utilerrors.NewAggregate returning a plain nil error when empty.
func aggregate(errs []error) error {
	if agg := utilerrors.NewAggregate(errs); agg != nil {
		return agg
	}
	return nil
}

func runtimeCondition(s *runtimeapi.RuntimeStatus, t string) *runtimeapi.RuntimeCondition {
	for _, c := range s.GetConditions() {
		if c.GetType() == t {
			return c
		}
	}
	return nil
}

// formatRuntimeCondition formats a runtime condition as kubelet's messages do.
func formatRuntimeCondition(c *runtimeapi.RuntimeCondition) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s=%t reason:%s message:%s", c.Type, c.Status, c.Reason, c.Message)
}
