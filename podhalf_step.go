package nodekit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/probe"
)

// SyncOnce is the pod half's synchronous step, for a caller that drives
// many pod halves on workers of its own (heartbeat/fleet) instead of
// calling Run: it takes in the shared pods that changed
// (PodHalfOptions.SharedPods, once the Node is registered), hands the
// merged updates and the changed probe results to the pod workers, runs
// the probes that are due, the pod workers' step (podsync.Engine.SyncOnce)
// and the status writer's, and returns how long to wait before the next
// step (negative: nothing is scheduled). Only a pod half with no loop of
// its own can be stepped: its only pod source SharedPods, a backend with no
// Runnables, no RuntimeClass watch or eviction manager, and a given
// Recorder (or none); SyncOnce names what stands in the way otherwise. Run
// and SyncOnce are not used together.
func (p *PodHalf) SyncOnce(ctx context.Context) (time.Duration, error) {
	p.stepMu.Lock()
	defer p.stepMu.Unlock()
	if err := p.steppable(); err != nil {
		return 0, err
	}
	if !p.notified {
		// Never ended: it lives as long as the pod half. A changed result
		// makes its pod due, as the engine's Run does from its channel,
		// without a buffer per node to hold a step's changes.
		p.probes.Notify(context.WithoutCancel(ctx), func(_ context.Context, u probe.Update) { p.engine.Trigger(u.PodUID) })
		p.notified = true
	}
	if err := p.mergeShared(ctx); err != nil {
		return 0, err
	}
	p.drain()
	next := loop.Never
	earliest := func(d time.Duration) {
		if d >= 0 && (next < 0 || d < next) {
			next = d
		}
	}
	d, err := p.probes.SyncOnce(ctx)
	if err != nil {
		return 0, err
	}
	earliest(d)
	p.drain()
	d, err = p.engine.SyncOnce(ctx)
	earliest(d)
	if err != nil {
		return next, err
	}
	d, err = p.writer.SyncOnce(ctx)
	earliest(d)
	return next, err
}

// steppable says what stands in the way of SyncOnce, if anything.
func (p *PodHalf) steppable() error {
	if len(p.unstepped) > 0 {
		return fmt.Errorf("nodekit: the pod half cannot be stepped: its %s run only under Run", strings.Join(p.unstepped, ", "))
	}
	return nil
}

// mergeShared merges the node's shared pods as the API source's set when
// they changed since the last step and the Node is registered.
func (p *PodHalf) mergeShared(ctx context.Context) error {
	if p.shared == nil || p.registered != nil && !p.registered() {
		return nil
	}
	if gen, synced := p.shared.nodeGen(p.name); !synced || p.merged && gen == p.sharedGen {
		return nil
	}
	pods, gen, _ := p.shared.NodePods(p.name)
	p.sharedGen, p.merged = gen, true
	return p.merger.Merge(ctx, podsource.Update{Op: podsource.OpSet, Source: podsource.APISource, Pods: pods})
}

// drain hands what the sources sent to the pod workers.
func (p *PodHalf) drain() {
	for {
		select {
		case u := <-p.merger.Updates():
			p.engine.HandleUpdate(u)
		default:
			return
		}
	}
}

// runShared is the API source of a pod half run (Run) with SharedPods:
// a set whenever the node's shared pods change, once the Node is
// registered.
func (p *PodHalf) runShared(ctx context.Context, updates chan<- podsource.Update) error {
	changed := make(chan struct{}, 1)
	p.shared.OnChange(p.name, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if !p.waitRegistered(ctx) {
		return nil
	}
	var last uint64
	sent := false
	for {
		if pods, gen, synced := p.shared.NodePods(p.name); synced && (!sent || gen != last) {
			select {
			case updates <- podsource.Update{Op: podsource.OpSet, Source: podsource.APISource, Pods: pods}:
			case <-ctx.Done():
				return nil
			}
			last, sent = gen, true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}
