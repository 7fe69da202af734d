package usage

import (
	"context"
	"errors"
	"fmt"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/internal/loop"
)

// Snapshot is one sample of the node's and its pods' usage.
type Snapshot struct {
	// Time is when the sample was taken, on the collector's clock.
	Time time.Time
	// Summary is the sample as kubelet's /stats/summary reports it. It is
	// shared by every reader: do not modify it.
	Summary *statsapi.Summary
	// Err, when not nil, says why the node's CPU or memory or the pods'
	// figures are missing from this sample (what could be read is there).
	// Optional parts (network, file systems, process counts, logs) that
	// could not be read are left out without an error.
	Err error
}

// Collector samples the node's and its pods' usage and publishes each sample
// as a Snapshot. SyncOnce takes one sample; Run samples every
// Options.Interval. Latest returns the last sample without waiting.
type Collector struct {
	opts Options
	host *host

	mu             sync.Mutex // one sample at a time; guards the fields below
	prev           map[string]cpuPoint
	noSandboxStats bool // the runtime answered Unimplemented
	bootTime       time.Time
	files          map[string]*podFiles                   // by pod UID, the pods of the last sample
	ctrs           map[string]*ctrFiles                   // by container ID, the running containers of pods with a cgroup
	layers         map[string]*runtimeapi.FilesystemUsage // writable layers by container ID, as last listed
	layersAt       time.Time                              // when (zero: never)

	latest atomic.Pointer[Snapshot]
}

// cpuPoint is a cumulative CPU time and when it was read, kept for the rate
// between two samples.
type cpuPoint struct {
	cum uint64
	t   time.Time
}

// New returns a Collector. It reads nothing until SyncOnce or Run.
func New(opts Options) (*Collector, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	return &Collector{opts: opts, host: newHost(opts.HostRoot), prev: map[string]cpuPoint{}, files: map[string]*podFiles{},
		ctrs: map[string]*ctrFiles{}}, nil
}

// Latest returns the last sample, or nil before the first one. It never
// waits on I/O.
func (c *Collector) Latest() *Snapshot { return c.latest.Load() }

// Run samples at once and then every Options.Interval until ctx ends, when
// it returns nil. A sample's error is logged, and the sample published with
// it.
func (c *Collector) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	return loop.Run(ctx, c.opts.Clock, func(ctx context.Context) (time.Duration, error) {
		if err := c.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Usage sample incomplete")
		}
		return c.opts.Interval, nil
	})
}

func u64p(v uint64) *uint64 { return &v }

// cpu builds CPU stats from a cumulative time read at t, with the rate
// since the previous sample of key (or the runtime's rate, when it gave
// one), and records the point for the next sample in next.
func (c *Collector) cpu(key string, t time.Time, cum uint64, runtimeRate uint64, next map[string]cpuPoint) *statsapi.CPUStats {
	st := &statsapi.CPUStats{Time: metav1.NewTime(t), UsageCoreNanoSeconds: u64p(cum)}
	if runtimeRate > 0 {
		st.UsageNanoCores = u64p(runtimeRate)
	} else if p, ok := c.prev[key]; ok && cum >= p.cum && t.After(p.t) {
		st.UsageNanoCores = u64p(uint64(float64(cum-p.cum) * float64(time.Second) / float64(t.Sub(p.t))))
	}
	next[key] = cpuPoint{cum: cum, t: t}
	return st
}

// memory builds memory stats from a cgroup's figures; available is the
// limit (or capacity) less the working set when there is one.
func memory(t time.Time, u cgroupUsage, limit uint64) *statsapi.MemoryStats {
	ws := u.workingSet()
	m := &statsapi.MemoryStats{
		Time:            metav1.NewTime(t),
		UsageBytes:      u64p(u.usage),
		WorkingSetBytes: u64p(ws),
		RSSBytes:        u64p(u.rss),
		PageFaults:      u64p(u.pgfault),
		MajorPageFaults: u64p(u.pgmajf),
	}
	if limit > 0 {
		var avail uint64
		if limit > ws {
			avail = limit - ws
		}
		m.AvailableBytes = u64p(avail)
	}
	return m
}

func fsStats(t time.Time, fs fsInfo) *statsapi.FsStats {
	return &statsapi.FsStats{
		Time:           metav1.NewTime(t),
		AvailableBytes: u64p(fs.available),
		CapacityBytes:  u64p(fs.capacity),
		UsedBytes:      u64p(fs.used),
		InodesFree:     u64p(fs.inodesFree),
		Inodes:         u64p(fs.inodes),
		InodesUsed:     u64p(fs.inodes - fs.inodesFree),
	}
}

// SyncOnce takes one sample and publishes it. The error, also in the
// published Snapshot, says which required figures are missing; a sample is
// published even then.
func (c *Collector) SyncOnce(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	logger := klog.FromContext(ctx)
	now := c.opts.Clock.Now()
	mt := metav1.NewTime(now)
	next := make(map[string]cpuPoint, len(c.prev))
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: c.opts.NodeName}, Pods: []statsapi.PodStats{}}
	var errs []error

	// CPU and memory.
	root, err := c.host.cgroup(c.host.rootCgroupDirs(), &c.host.rootLoc)
	if err != nil {
		logger.V(4).Info("Reading the root cgroup", "err", err)
	}
	if cum, err := c.host.nodeCPU(root); err != nil {
		errs = append(errs, fmt.Errorf("node cpu: %w", err))
	} else {
		s.Node.CPU = c.cpu("node", now, cum, 0, next)
	}
	if m, err := c.host.nodeMemory(root); err != nil {
		errs = append(errs, fmt.Errorf("node memory: %w", err))
	} else {
		s.Node.Memory = memory(now, m.cgroupUsage, m.capacity)
	}
	if c.bootTime.IsZero() {
		if _, boot, err := c.host.procStat(); err == nil {
			c.bootTime = boot
		}
	}
	s.Node.StartTime = metav1.NewTime(c.bootTime)

	// File systems, network, processes: optional.
	nodeFs, err := statfs(c.opts.RootDir)
	haveNodeFs := err == nil
	if haveNodeFs {
		s.Node.Fs = fsStats(now, nodeFs)
	} else {
		logger.V(4).Info("Reading the node file system", "path", c.opts.RootDir, "err", err)
	}
	if ifaces, def, err := c.host.network(); err == nil {
		s.Node.Network = netStats(mt, ifaces, def)
	} else {
		logger.V(4).Info("Reading network counters", "err", err)
	}
	if maxPID, procs, err := c.host.rlimit(); err == nil {
		rl := &statsapi.RlimitStats{Time: mt, NumOfRunningProcesses: &procs}
		if maxPID >= 0 {
			rl.MaxPID = &maxPID
		}
		s.Node.Rlimit = rl
	} else {
		logger.V(4).Info("Reading process counts", "err", err)
	}

	// Pods and containers.
	if c.opts.Runtime != nil {
		if err := c.pods(ctx, now, s, nodeFs, haveNodeFs, next); err != nil {
			errs = append(errs, err)
		}
	}

	c.prev = next
	snap := &Snapshot{Time: now, Summary: s, Err: errors.Join(errs...)}
	if snap.Err != nil {
		snap.Err = fmt.Errorf("usage: %w", snap.Err)
	}
	c.latest.Store(snap)
	return snap.Err
}
