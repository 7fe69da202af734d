package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/admission"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/runtime"
)

// pressure is the node's MemoryPressure, DiskPressure and PIDPressure:
// the eviction manager's once the pod half has built it, the default
// setters' (False) before and without one.
type pressure struct {
	m atomic.Pointer[eviction.Manager]
}

// pressureConditions pairs the default setters' names with the conditions.
var pressureConditions = []struct {
	setter string
	cond   corev1.NodeConditionType
}{
	{nodestatus.SetterMemoryPressure, corev1.NodeMemoryPressure},
	{nodestatus.SetterDiskPressure, corev1.NodeDiskPressure},
	{nodestatus.SetterPIDPressure, corev1.NodePIDPressure},
}

// setters returns s with its pressure setters reading the eviction manager
// when there is one.
func (p *pressure) setters(s nodestatus.Setters) (nodestatus.Setters, error) {
	for _, pc := range pressureConditions {
		i := s.Index(pc.setter)
		if i < 0 {
			continue
		}
		def, cond := s[i].StatusSetter, pc.cond
		var err error
		s, err = s.Replace(pc.setter, nodestatus.StatusSetterFunc(func(ctx context.Context, node *corev1.Node) error {
			if m := p.m.Load(); m != nil {
				return m.ConditionSetter(cond).SetStatus(ctx, node)
			}
			return def.SetStatus(ctx, node)
		}))
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

var errNoSample = errors.New("no usage sample yet")

// newEviction builds kubelet's eviction manager on the usage collector's
// samples, the pod workers (p.engine, stored before the manager runs: its
// killer and its active pods), dead-container and image garbage
// collection, and the image
// GC that runs on its own period. admit is the admitter the engine gets:
// the eviction manager's (pods refused under pressure) before the
// predicates.
func (p *podHalf) newEviction(rt runtime.Runtime, syncer *cri.Syncer, collector *usage.Collector, predicates admission.Admitter) (*eviction.Manager, *eviction.ImageGC, admission.Admitter, error) {
	cfg := p.cfg
	imageFS := func(context.Context) (*eviction.FsStats, error) {
		s := collector.Latest()
		if s == nil {
			return nil, errNoSample
		}
		snap := eviction.FromSummary(s.Time, s.Summary)
		if snap.ImageFS == nil {
			return nil, errors.New("the runtime reports no image file system")
		}
		return snap.ImageFS, nil
	}
	gc, err := eviction.NewImageGC(eviction.ImageGCOptions{Runtime: rt, ImageFS: imageFS,
		HighThresholdPercent: cfg.imageGCHigh, LowThresholdPercent: cfg.imageGCLow, MinAge: cfg.imageMinAge,
		PinnedImages: []string{cfg.podInfraImage}, Clock: p.clock})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("image GC: %w", err)
	}
	m, err := eviction.New(eviction.Options{
		NodeName: p.name,
		Observer: eviction.ObserverFunc(func(context.Context) (*eviction.Snapshot, error) {
			s := collector.Latest()
			if s == nil {
				return nil, errNoSample
			}
			return eviction.FromSummary(s.Time, s.Summary), nil
		}),
		ActivePods: func() []*corev1.Pod {
			if e := p.engine.Load(); e != nil {
				return e.ActivePods()
			}
			return nil
		},
		Killer: eviction.KillerFunc(func(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus, grace int64) error {
			e := p.engine.Load()
			if e == nil {
				return errors.New("the pod workers are not running yet")
			}
			return e.Evict(ctx, pod, st, grace)
		}),
		PodCleanedUp: func(pod *corev1.Pod) bool {
			e := p.engine.Load()
			if e == nil {
				return true
			}
			l, ok := e.PodLifecycle(pod.UID)
			return !ok || l == podsync.Done
		},
		// Dead containers first, then images, as kubelet reclaims.
		Reclaimers: []eviction.Reclaimer{eviction.ReclaimerFunc(func(ctx context.Context, _ eviction.Signal) (uint64, error) {
			_, err := syncer.RemoveDeadContainers(ctx)
			return 0, err // the manager observes the node again
		}), gc},
		EvictionHard:             cfg.evictionHard,
		EvictionSoft:             cfg.evictionSoft,
		EvictionSoftGracePeriod:  cfg.evictionSoftGrace,
		EvictionMinimumReclaim:   cfg.evictionMinReclaim,
		PressureTransitionPeriod: cfg.evictionTransition,
		MaxPodGracePeriod:        cfg.evictionMaxPodGrace,
		Clock:                    p.clock,
		Registerer:               p.registry,
		Recorder:                 p.recorder,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("eviction: %w", err)
	}
	admit := admission.AdmitterFunc(func(pod *corev1.Pod, active []*corev1.Pod) admission.Result {
		if r := m.Admit(pod, active); !r.Admit {
			return r
		}
		return predicates.Admit(pod, active)
	})
	return m, gc, admit, nil
}
