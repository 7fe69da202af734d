package podsynctest

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerRun is one run of a simulated container.
type ContainerRun struct {
	Name, ID   string
	Restart    int // 0 for the first run
	StartedAt  time.Time
	FinishedAt time.Time // zero while it runs
	ExitCode   int32
}

// Running reports whether the run has not finished.
func (r ContainerRun) Running() bool { return r.FinishedAt.IsZero() }

// Runs returns the pod's container runs that started, in the order they
// started (nil for a pod the simulation does not hold).
func (b *Backend) Runs(uid types.UID) []ContainerRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pods[uid]
	if p == nil {
		return nil
	}
	p.advance(b.o.Clock.Now())
	out := make([]ContainerRun, 0, len(p.containers))
	for _, c := range p.containers {
		if c.StartedAt.IsZero() {
			continue
		}
		r := ContainerRun{Name: c.Name, ID: c.ID, Restart: c.RestartCount, StartedAt: c.StartedAt}
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			r.FinishedAt, r.ExitCode = c.FinishedAt, c.ExitCode
		}
		out = append(out, r)
	}
	return out
}
