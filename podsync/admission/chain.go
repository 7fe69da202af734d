package admission

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Chain asks admitters in the order they were added; the first that does
// not admit a pod decides, as the kubelet's admit handlers do (eviction
// before the predicates). An empty Chain admits every pod.
//
// Add is for assembly: an agent gives the Chain to the pod workers and
// adds the admitters built after them (the eviction manager, which needs
// the pod workers) before anything runs, as the kubelet registers its admit
// handlers. The zero Chain is ready to use.
type Chain struct {
	mu        sync.RWMutex
	admitters []Admitter
}

var _ Admitter = (*Chain)(nil)

// Add appends a to the chain; a nil a is ignored.
func (c *Chain) Add(a Admitter) {
	if a == nil {
		return
	}
	c.mu.Lock()
	c.admitters = append(c.admitters, a)
	c.mu.Unlock()
}

// Admit returns the first refusal of the chain's admitters, else Admitted
// (with the Preempt list of the admitter that admitted by preemption).
func (c *Chain) Admit(pod *corev1.Pod, active []*corev1.Pod) Result {
	c.mu.RLock()
	defer c.mu.RUnlock()
	res := Admitted
	for _, a := range c.admitters {
		r := a.Admit(pod, active)
		if !r.Admit {
			return r
		}
		if len(r.Preempt) > 0 {
			res = r
		}
	}
	return res
}
