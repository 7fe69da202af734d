package nodestatus

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

// DiskUsageCondition is the condition type DiskUsage writes unless told
// otherwise.
const DiskUsageCondition corev1.NodeConditionType = "DiskUsageHigh"

// Reasons of the DiskUsage condition.
const (
	DiskUsageReasonHigh    = "DiskUsageAboveThreshold"
	DiskUsageReasonOK      = "DiskUsageBelowThreshold"
	DiskUsageReasonUnknown = "DiskUsageUnknown"
)

// DiskUsageOptions configures DiskUsage.
type DiskUsageOptions struct {
	// Path is a directory on the file system to watch. Required, absolute.
	Path string
	// ThresholdPercent is the usage, in percent of the file system's size,
	// at or above which the condition is True. Default 90; more than 0, at
	// most 100.
	ThresholdPercent float64
	// ConditionType is the condition written. Default DiskUsageCondition
	// ("DiskUsageHigh"). It must not be one of kubelet's own condition types.
	ConditionType corev1.NodeConditionType
	// ResourceName, when set, is also reported as an extended resource whose
	// capacity and allocatable are the file system's size in bytes, so that
	// pods can request space on it (for example "example.com/scratch").
	// It must be a domain-prefixed name outside kubernetes.io. Default none.
	ResourceName corev1.ResourceName
	// StatFS reads the file system. Default: statfs(2) (NewLinuxHost's).
	StatFS func(path string) (FSStats, error)
	// Clock gives the condition times. Default clock.RealClock{}.
	Clock clock.PassiveClock
}

// DiskUsage returns a setter that reports how full the file system holding
// opts.Path is, as a node condition of its own type (True when usage is at
// or above the threshold, Unknown when the file system cannot be read), and
// optionally as an extended resource. It owns only that condition and that
// resource, so it can be added to DefaultSetters anywhere; place it before
// Ready to keep Ready the last condition, as kubelet does:
//
//	setters, _ = setters.InsertBefore(nodestatus.SetterReady,
//		nodestatus.Named{Name: "DiskUsage", StatusSetter: du})
//
// It is also a small example of a custom setter to copy.
func DiskUsage(opts DiskUsageOptions) (StatusSetter, error) {
	if opts.Path == "" || !filepath.IsAbs(opts.Path) {
		return nil, fmt.Errorf("nodestatus: DiskUsageOptions.Path must be an absolute path, not %q", opts.Path)
	}
	switch {
	case opts.ThresholdPercent == 0:
		opts.ThresholdPercent = 90
	case !(opts.ThresholdPercent > 0 && opts.ThresholdPercent <= 100):
		return nil, fmt.Errorf("nodestatus: DiskUsageOptions.ThresholdPercent must be more than 0 and at most 100, not %v", opts.ThresholdPercent)
	}
	if opts.ConditionType == "" {
		opts.ConditionType = DiskUsageCondition
	}
	switch opts.ConditionType {
	case corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable:
		return nil, fmt.Errorf("nodestatus: DiskUsageOptions.ConditionType %q belongs to kubelet's own setters", opts.ConditionType)
	}
	if n := string(opts.ResourceName); n != "" {
		domain, _, ok := strings.Cut(n, "/")
		if !ok || strings.HasSuffix(domain, "kubernetes.io") || len(validation.IsQualifiedName(n)) > 0 {
			return nil, fmt.Errorf("nodestatus: DiskUsageOptions.ResourceName %q must be a domain-prefixed name outside kubernetes.io", n)
		}
	}
	if opts.StatFS == nil {
		opts.StatFS = statFS
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &diskUsage{opts: opts}, nil
}

type diskUsage struct{ opts DiskUsageOptions }

func (d *diskUsage) SetStatus(_ context.Context, node *corev1.Node) error {
	now := metav1.NewTime(d.opts.Clock.Now())
	st, err := d.opts.StatFS(d.opts.Path)
	if err == nil && st.Capacity == 0 {
		err = fmt.Errorf("file system of %s reports size 0", d.opts.Path)
	}
	if err != nil {
		SetCondition(node, corev1.NodeCondition{
			Type: d.opts.ConditionType, Status: corev1.ConditionUnknown, Reason: DiskUsageReasonUnknown,
			Message: fmt.Sprintf("cannot read the file system of %s", d.opts.Path),
		}, now)
		return fmt.Errorf("disk usage of %s: %w", d.opts.Path, err)
	}
	// Usage as df computes it: used / (used + available to users), rounded up.
	used := st.Capacity - min(st.Capacity, st.Available)
	pct := 0
	if denom := used + st.Available; denom > 0 {
		pct = int((used*100 + denom - 1) / denom)
	}
	c := corev1.NodeCondition{Type: d.opts.ConditionType, Status: corev1.ConditionFalse, Reason: DiskUsageReasonOK}
	if float64(pct) >= d.opts.ThresholdPercent {
		c.Status, c.Reason = corev1.ConditionTrue, DiskUsageReasonHigh
	}
	c.Message = fmt.Sprintf("file system of %s is %d%% full (threshold %v%%)", d.opts.Path, pct, d.opts.ThresholdPercent)
	SetCondition(node, c, now)

	if d.opts.ResourceName != "" {
		q := *resource.NewQuantity(int64(st.Capacity), resource.BinarySI)
		if node.Status.Capacity == nil {
			node.Status.Capacity = corev1.ResourceList{}
		}
		if node.Status.Allocatable == nil {
			node.Status.Allocatable = corev1.ResourceList{}
		}
		node.Status.Capacity[d.opts.ResourceName] = q
		node.Status.Allocatable[d.opts.ResourceName] = q
	}
	return nil
}
