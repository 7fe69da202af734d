// Package backend is a pod half's backend on a container runtime, the
// kubelet's runtime side assembled from podsync/cri and the packages beside
// it: the CRI syncer, the pods' data from the API (podsync/volume), usage
// sampling (nodestatus/usage), container log rotation (podsync/logrotate),
// image garbage collection and reclaim under pressure (podsync/eviction),
// and the runtime's status for the node's Ready condition.
//
//	b := backend.New(backend.Options{Syncer: cri.Options{Runtime: rt, ...}})
//	pods, err := nodekit.NewPodHalf(nodekit.PodHalfOptions{..., Backend: b.Build})
//
// It is a package of its own so that podsync/cri's users (and tests) need
// not link the pod data, usage and log rotation code.
package backend

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/eviction"
	"github.com/nodekit/nodekit/podsync/logrotate"
	"github.com/nodekit/nodekit/podsync/volume"
)

// Options configure a Backend: the kubelet's runtime side of a pod
// half on a container runtime. Each part's options hold only what the
// agent chooses; what comes from the pod half (clock, recorder, metrics,
// probes, the node) is set by Build.
type Options struct {
	// Syncer holds the CRI syncer's options; Runtime is required. Probes,
	// PodData, NodeName, HostIPs, RuntimeClasses, Clock, Recorder and
	// Registerer are set by Build.
	Syncer cri.Options
	// Volume holds the pod data manager's options: its API clients
	// (volume.WithClients), else pods that use API objects wait. Clock,
	// Recorder, Allocatable and OnChange are set by Build.
	Volume volume.Options
	// Usage holds the usage collector's options (interval, root dirs).
	// NodeName, Runtime, Clock, PodLogRoot, PodCgroupDirs and PodVolumeDirs
	// are set by Build.
	Usage usage.Options
	// Logs holds the container log rotation's options (sizes, interval).
	// Runtime and Clock are set by Build.
	Logs logrotate.Options
	// ImageGC holds the image garbage collector's options (thresholds,
	// minimum age, pinned images). Runtime, ImageFS and Clock are set by
	// Build; PauseImage is added to PinnedImages.
	ImageGC eviction.ImageGCOptions
	// PauseImage is the sandbox image (the kubelet's
	// --pod-infra-container-image), pulled when missing before the first
	// sandbox needs it. Default "": none. The runtime's own configuration
	// still chooses the image its sandboxes run, as with the kubelet.
	PauseImage string
}

// Backend is a pod half's backend on a container runtime: the CRI syncer
// with the pods' data from the API (podsync/volume), usage sampling
// (nodestatus/usage, the node API's stats and eviction's observations),
// container log rotation, image garbage collection, dead-container and
// image reclaim under pressure, and the runtime's status for the node's
// Ready condition. Build is a podsync.BackendFunc.
type Backend struct {
	o      Options
	syncer *cri.Syncer
	data   *volume.Manager
	usage  *usage.Collector
}

// New returns a backend to be built by a pod half
// (PodHalfOptions.Backend: b.Build).
func New(o Options) *Backend { return &Backend{o: o} }

// errNoSample is the observer's error before the first usage sample.
var errNoSample = errors.New("no usage sample yet")

// Build builds the backend's parts from the pod half's.
func (b *Backend) Build(p podsync.BackendParts) (podsync.Backend, error) {
	if b.syncer != nil {
		return podsync.Backend{}, errors.New("backend: Build called twice")
	}
	rt := b.o.Syncer.Runtime
	if rt == nil {
		return podsync.Backend{}, optcheck.Required("backend: Options.Syncer.Runtime")
	}
	vo := b.o.Volume
	vo.Clock, vo.Recorder, vo.OnChange = p.Clock, p.Recorder, p.Triggers.Trigger
	if node := p.Node; node != nil {
		vo.Allocatable = func() corev1.ResourceList {
			if n := node.Node(); n != nil {
				return n.Status.Allocatable
			}
			return nil
		}
	}
	data, err := volume.New(vo)
	if err != nil {
		return podsync.Backend{}, err
	}
	so := b.o.Syncer
	so.PodData, so.NodeName, so.HostIPs = data, p.NodeName, p.HostIPs
	if p.RuntimeClasses != nil {
		so.RuntimeClasses = p.RuntimeClasses
	}
	so.Clock, so.Recorder, so.Registerer = p.Clock, p.Recorder, p.Registerer
	if p.Probes != nil {
		so.Probes = p.Probes
	}
	syncer, err := cri.New(so)
	if err != nil {
		return podsync.Backend{}, err
	}
	uo := b.o.Usage
	uo.NodeName, uo.Runtime, uo.Clock, uo.PodLogRoot = p.NodeName, rt, p.Clock, so.PodLogRoot
	uo.PodCgroupDirs, uo.PodVolumeDirs = syncer.PodCgroupDirs, syncer.PodVolumeDirs
	collector, err := usage.New(uo)
	if err != nil {
		return podsync.Backend{}, fmt.Errorf("usage: %w", err)
	}
	lo := b.o.Logs
	lo.Runtime, lo.Clock = rt, p.Clock
	logs, err := logrotate.New(lo)
	if err != nil {
		return podsync.Backend{}, fmt.Errorf("container logs: %w", err)
	}
	observe := func(context.Context) (*eviction.Snapshot, error) {
		s := collector.Latest()
		if s == nil {
			return nil, errNoSample
		}
		return eviction.FromSummary(s.Time, s.Summary), nil
	}
	go_ := b.o.ImageGC
	go_.Runtime, go_.Clock = rt, p.Clock
	go_.ImageFS = func(ctx context.Context) (*eviction.FsStats, error) {
		snap, err := observe(ctx)
		if err != nil {
			return nil, err
		}
		if snap.ImageFS == nil {
			return nil, errors.New("the runtime reports no image file system")
		}
		return snap.ImageFS, nil
	}
	if b.o.PauseImage != "" {
		go_.PinnedImages = append(append([]string(nil), go_.PinnedImages...), b.o.PauseImage)
	}
	gc, err := eviction.NewImageGC(go_)
	if err != nil {
		return podsync.Backend{}, fmt.Errorf("image GC: %w", err)
	}
	b.syncer, b.data, b.usage = syncer, data, collector
	return podsync.Backend{
		Syncer:        syncer,
		RuntimeStatus: syncer,
		Observer:      eviction.ObserverFunc(observe),
		// Dead containers first, then images, as the kubelet reclaims.
		Reclaimers: []eviction.Reclaimer{eviction.ReclaimerFunc(func(ctx context.Context, _ eviction.Signal) (uint64, error) {
			_, err := syncer.RemoveDeadContainers(ctx)
			return 0, err // the manager observes the node again
		}), gc},
		Runnables: []podsync.BackendRunnable{
			{Name: "sandbox image", Run: func(ctx context.Context) error {
				cri.EnsureImage(ctx, rt, b.o.PauseImage)
				<-ctx.Done()
				return nil
			}},
			{Name: "pod data", Run: data.Run},
			{Name: "usage", Run: collector.Run},
			{Name: "container logs", Run: logs.Run},
			{Name: "image GC", Run: gc.Run},
		},
	}, nil
}

// Syncer returns the CRI syncer, nil before Build.
func (b *Backend) Syncer() *cri.Syncer { return b.syncer }

// PodData returns the pods' data manager, nil before Build.
func (b *Backend) PodData() *volume.Manager { return b.data }

// Usage returns the usage collector (a node API's stats), nil before
// Build.
func (b *Backend) Usage() *usage.Collector { return b.usage }
