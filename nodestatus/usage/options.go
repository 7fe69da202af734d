package usage

import (
	"context"
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/runtime"
)

// Runtime is the part of the container runtime the collector uses: the
// pod sandboxes and containers, and their usage. A runtime.Runtime is one.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	runtime.StatsProvider
}

// Defaults and bounds of Options.
const (
	// DefaultInterval is how often Run samples: cAdvisor's housekeeping
	// interval, from which kubelet serves its stats.
	DefaultInterval = 10 * time.Second
	// MinInterval and MaxInterval bound Options.Interval and
	// Options.VolumeInterval.
	MinInterval = time.Second
	MaxInterval = 10 * time.Minute
	// DefaultVolumeInterval is how often a pod's volumes are measured
	// again: the kubelet's volumeStatsAggPeriod.
	DefaultVolumeInterval = time.Minute
	// DefaultHostRoot is where /proc and /sys are read from.
	DefaultHostRoot = "/"
	// DefaultRootDir is kubelet's root directory, whose file system is the
	// node file system.
	DefaultRootDir = "/var/lib/kubelet"
	// DefaultPodLogRoot holds the pods' log directories.
	DefaultPodLogRoot = "/var/log/pods"
)

// Options configure a Collector. The zero value of each field means its
// default.
type Options struct {
	// NodeName is the node's name in the Summary. Required.
	NodeName string
	// Runtime is the container runtime whose pods and containers are
	// measured. Nil: the Summary has the node alone.
	Runtime Runtime
	// Clock times the samples and drives Run. Default clock.RealClock{}.
	Clock clock.WithTicker
	// Interval is how often Run samples. Default DefaultInterval (10s);
	// between MinInterval and MaxInterval.
	Interval time.Duration
	// HostRoot is the directory /proc and /sys are read below (proc/stat,
	// proc/meminfo, sys/fs/cgroup/...), so that tests can point it at a
	// tree of their own. Default "/".
	HostRoot string
	// RootDir is the agent's root directory; the file system holding it is
	// the node file system (nodefs). Default "/var/lib/kubelet".
	RootDir string
	// PodLogRoot holds the pods' log directories
	// (<namespace>_<name>_<uid>/<container>/), whose sizes are the
	// containers' log usage. Default "/var/log/pods".
	PodLogRoot string
	// PodCgroupDirs returns the directories of a pod's cgroup, one per
	// mounted cgroup hierarchy (absolute paths), or none when it has no
	// cgroup. A pod's CPU, memory and process count are read from them, and
	// its network counters from the network namespace of a process in them,
	// as the kubelet's cAdvisor reads them; its containers' CPU and memory
	// from the directory named by each container's ID below them (where
	// containerd puts a container's cgroup with the cgroupfs driver), so
	// that CRI ListContainerStats, which has the runtime ask every
	// container's shim, is needed only for the writable layers, every
	// VolumeInterval, and for containers without such a directory. Pods
	// without (all pods when nil) take theirs from CRI
	// ListPodSandboxStats, asked only for them, or, where the runtime does
	// not have it, the sums of their containers'; their containers take
	// theirs from ListContainerStats at every sample. cri.Syncer's
	// PodCgroupDirs is one.
	PodCgroupDirs func(podUID string) []string
	// PodVolumeDirs returns a pod's volumes kept on the node's disk, by
	// volume name (emptyDir not backed by memory, configMap, downward API,
	// ...), whose sizes are the pod's VolumeStats and count in its
	// ephemeral storage. Nil: pods have no VolumeStats. cri.Syncer's
	// PodVolumeDirs is one.
	PodVolumeDirs func(podUID string) map[string]string
	// VolumeInterval is how often a pod's volumes (PodVolumeDirs) are
	// looked up and measured again (a walk of each directory); the samples
	// in between report the last figures, with the time they were taken,
	// as the kubelet caches its volume stats for volumeStatsAggPeriod.
	// Containers read from their cgroups (PodCgroupDirs) have their
	// writable layers asked of the runtime at the same period.
	// Default DefaultVolumeInterval (1m); between MinInterval and
	// MaxInterval.
	VolumeInterval time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.VolumeInterval == 0 {
		o.VolumeInterval = DefaultVolumeInterval
	}
	if o.HostRoot == "" {
		o.HostRoot = DefaultHostRoot
	}
	if o.RootDir == "" {
		o.RootDir = DefaultRootDir
	}
	if o.PodLogRoot == "" {
		o.PodLogRoot = DefaultPodLogRoot
	}
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, optcheck.Required("Options.NodeName"))
	}
	if err := optcheck.Range("Options.Interval", o.Interval, MinInterval, MaxInterval); err != nil {
		errs = append(errs, err)
	}
	if err := optcheck.Range("Options.VolumeInterval", o.VolumeInterval, MinInterval, MaxInterval); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}
