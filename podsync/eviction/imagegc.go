package eviction

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
)

// ImageRuntime is what ImageGC needs of a container runtime: a sliver of
// runtime.Runtime (runtime.ImageManager's listing and removal, and the
// containers, to tell which images are in use).
type ImageRuntime interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// Kubelet's image garbage collection defaults.
const (
	DefaultImageGCHighThresholdPercent = 85
	DefaultImageGCLowThresholdPercent  = 80
	DefaultImageMinimumGCAge           = 2 * time.Minute
	DefaultImageGCPeriod               = 5 * time.Minute
)

// ImageGCOptions configure an ImageGC. The zero value of a field means
// its default, stated in its comment.
type ImageGCOptions struct {
	// Runtime lists and removes images and lists containers. Required.
	Runtime ImageRuntime
	// ImageFS reports the image file system's capacity and available
	// bytes, for GarbageCollect's thresholds (CRI reports only what images
	// use). Default nil: GarbageCollect returns an error; Reclaim works.
	ImageFS func(ctx context.Context) (*FsStats, error)
	// HighThresholdPercent is kubelet's imageGCHighThresholdPercent: image
	// file system usage at or above which GarbageCollect frees space.
	// Default 85; 1–100 (100 turns GarbageCollect off).
	HighThresholdPercent int
	// LowThresholdPercent is kubelet's imageGCLowThresholdPercent: the
	// usage GarbageCollect frees down to. Default 80; 1–HighThresholdPercent.
	LowThresholdPercent int
	// MinAge is kubelet's imageMinimumGCAge: an image first seen less than
	// this long ago is kept (it may have just been pulled for a
	// container). Default 2m; not negative.
	MinAge time.Duration
	// PinnedImages are image references or IDs never removed, such as the
	// sandbox (pause) image; images the runtime reports pinned are kept
	// too. Default none.
	PinnedImages []string
	// Period is Run's interval, kubelet's image GC period. Default 5m;
	// 1s–1h.
	Period time.Duration
	// Clock is the time source. Default the real clock.
	Clock clock.WithTicker
}

// ImageGC is kubelet's image garbage collector: it removes images no
// container uses, least recently used first. It is a Reclaimer for the
// eviction Manager (Reclaim removes every unused image old enough, as
// kubelet's DeleteUnusedImages) and has its own periodic collection
// (GarbageCollect, Run) between the high and low thresholds.
type ImageGC struct {
	o ImageGCOptions

	mu      sync.Mutex
	records map[string]*imageRecord // by image ID
}

type imageRecord struct {
	firstDetected time.Time
	lastUsed      time.Time
	size          uint64
	pinned        bool
	refs          []string // tags and digests, for the in-use and pinned checks
}

var _ Reclaimer = (*ImageGC)(nil)

// NewImageGC checks o and returns an ImageGC.
func NewImageGC(o ImageGCOptions) (*ImageGC, error) {
	if o.Runtime == nil {
		return nil, optcheck.Required("eviction: ImageGCOptions.Runtime")
	}
	if o.HighThresholdPercent == 0 {
		o.HighThresholdPercent = DefaultImageGCHighThresholdPercent
	}
	if o.LowThresholdPercent == 0 {
		o.LowThresholdPercent = min(DefaultImageGCLowThresholdPercent, o.HighThresholdPercent)
	}
	switch {
	case o.HighThresholdPercent < 1 || o.HighThresholdPercent > 100:
		return nil, optcheck.Range("eviction: ImageGCOptions.HighThresholdPercent", o.HighThresholdPercent, 1, 100)
	case o.LowThresholdPercent < 1 || o.LowThresholdPercent > o.HighThresholdPercent:
		return nil, optcheck.Range("eviction: ImageGCOptions.LowThresholdPercent", o.LowThresholdPercent, 1, o.HighThresholdPercent)
	case o.MinAge < 0:
		return nil, optcheck.Min("eviction: ImageGCOptions.MinAge", o.MinAge, 0)
	case o.MinAge == 0:
		o.MinAge = DefaultImageMinimumGCAge
	}
	if o.Period == 0 {
		o.Period = DefaultImageGCPeriod
	}
	if err := optcheck.Range("eviction: ImageGCOptions.Period", o.Period, time.Second, time.Hour); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &ImageGC{o: o, records: map[string]*imageRecord{}}, nil
}

// Reclaim removes every image that no container uses, that is not pinned
// and was first seen at least MinAge ago, least recently used first, and
// returns the bytes freed. Failed removals are returned joined; the other
// images are still removed.
func (g *ImageGC) Reclaim(ctx context.Context, _ Signal) (uint64, error) {
	return g.free(ctx, math.MaxUint64, false)
}

// GarbageCollect frees image space as kubelet's periodic image GC does:
// when the image file system's usage is at or above HighThresholdPercent,
// it removes unused images, least recently used first, until usage is at
// LowThresholdPercent. It returns the bytes freed, and an error when it
// could not free enough.
func (g *ImageGC) GarbageCollect(ctx context.Context) (uint64, error) {
	if g.o.ImageFS == nil {
		return 0, errors.New("eviction: image GC: ImageGCOptions.ImageFS is not set")
	}
	fs, err := g.o.ImageFS(ctx)
	if err != nil {
		return 0, fmt.Errorf("eviction: image GC: image file system: %w", err)
	}
	if fs == nil || fs.CapacityBytes == 0 {
		return 0, errors.New("eviction: image GC: image file system capacity is unknown")
	}
	avail := min(fs.AvailableBytes, fs.CapacityBytes)
	usage := 100 - int(avail*100/fs.CapacityBytes)
	target := fs.CapacityBytes * uint64(100-g.o.LowThresholdPercent) / 100 // bytes to have available
	if usage < g.o.HighThresholdPercent || target <= avail {
		// Records are kept current even when nothing is to be freed, so
		// that images in use now count as used now.
		g.mu.Lock()
		defer g.mu.Unlock()
		_, err := g.detect(ctx, g.o.Clock.Now())
		return 0, err
	}
	want := target - avail
	klog.FromContext(ctx).Info("Image garbage collection: disk usage above the high threshold", "usage", usage,
		"highThreshold", g.o.HighThresholdPercent, "amountToFree", want, "lowThreshold", g.o.LowThresholdPercent)
	return g.free(ctx, want, true)
}

// SyncOnce is GarbageCollect without the byte count.
func (g *ImageGC) SyncOnce(ctx context.Context) error {
	_, err := g.GarbageCollect(ctx)
	return err
}

// Run collects every Period until ctx ends, then returns nil. Errors are
// logged.
func (g *ImageGC) Run(ctx context.Context) error {
	return loop.Run(ctx, g.o.Clock, func(ctx context.Context) (time.Duration, error) {
		if err := g.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Image garbage collection failed")
		}
		return g.o.Period, nil
	})
}

// detect refreshes the records from the runtime and returns the IDs and
// references of the images in use. Called with g.mu held.
func (g *ImageGC) detect(ctx context.Context, now time.Time) (map[string]bool, error) {
	images, err := g.o.Runtime.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("eviction: image GC: list images: %w", err)
	}
	ctrs, err := g.o.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("eviction: image GC: list containers: %w", err)
	}
	inUse := map[string]bool{}
	for _, c := range ctrs {
		if c.ImageRef != "" {
			inUse[c.ImageRef] = true
		}
		if ref := c.GetImage().GetImage(); ref != "" {
			inUse[ref] = true
		}
	}
	seen := make(map[string]bool, len(images))
	for _, img := range images {
		seen[img.Id] = true
		r := g.records[img.Id]
		if r == nil {
			r = &imageRecord{firstDetected: now}
			g.records[img.Id] = r
		}
		r.size = img.Size
		r.refs = append(append(r.refs[:0], img.RepoTags...), img.RepoDigests...)
		r.pinned = img.Pinned || slices.Contains(g.o.PinnedImages, img.Id) ||
			slices.ContainsFunc(r.refs, func(ref string) bool { return slices.Contains(g.o.PinnedImages, ref) })
		if inUse[img.Id] || slices.ContainsFunc(r.refs, func(ref string) bool { return inUse[ref] }) {
			r.lastUsed = now
			inUse[img.Id] = true
		}
	}
	for id := range g.records {
		if !seen[id] {
			delete(g.records, id)
		}
	}
	return inUse, nil
}

// free removes unused images, least recently used first (then first
// detected first), until want bytes are freed; with strict, freeing less
// than want is an error.
func (g *ImageGC) free(ctx context.Context, want uint64, strict bool) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.o.Clock.Now()
	inUse, err := g.detect(ctx, now)
	if err != nil {
		return 0, err
	}
	type candidate struct {
		id string
		*imageRecord
	}
	var cands []candidate
	for id, r := range g.records {
		if inUse[id] || r.pinned || !r.lastUsed.Before(now) || now.Sub(r.firstDetected) < g.o.MinAge {
			continue
		}
		cands = append(cands, candidate{id, r})
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if c := a.lastUsed.Compare(b.lastUsed); c != 0 {
			return c
		}
		if c := a.firstDetected.Compare(b.firstDetected); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	log := klog.FromContext(ctx)
	var freed uint64
	var errs []error
	for _, c := range cands {
		if freed >= want {
			break
		}
		log.Info("Removing image to free bytes", "imageID", c.id, "size", c.size)
		if err := g.o.Runtime.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: c.id}); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(g.records, c.id)
		freed += c.size
	}
	if strict && freed < want && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("eviction: image GC: attempted to free %d bytes, but only found %d bytes eligible to free", want, freed))
	}
	return freed, errors.Join(errs...)
}
