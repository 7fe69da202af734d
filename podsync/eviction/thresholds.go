package eviction

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/pressure"
)

// Signal is an eviction signal: a quantity the node has left, compared
// with thresholds.
type Signal string

// Kubelet's eviction signals.
const (
	// SignalMemoryAvailable is the node's available memory:
	// Snapshot.Memory.AvailableBytes, of AvailableBytes+WorkingSetBytes.
	SignalMemoryAvailable Signal = pressure.MemoryAvailable
	// SignalAllocatableMemoryAvailable is the memory left to pods under the
	// node's allocatable: Snapshot.AllocatableMemory.
	SignalAllocatableMemoryAvailable Signal = pressure.AllocatableMemoryAvailable
	// SignalNodeFsAvailable is the bytes available on the node's root
	// file system (kubelet's root dir, logs, emptyDir volumes).
	SignalNodeFsAvailable Signal = pressure.NodeFsAvailable
	// SignalNodeFsInodesFree is the free inodes on that file system.
	SignalNodeFsInodesFree Signal = pressure.NodeFsInodesFree
	// SignalImageFsAvailable is the bytes available on the runtime's
	// image file system.
	SignalImageFsAvailable Signal = pressure.ImageFsAvailable
	// SignalImageFsInodesFree is the free inodes on that file system.
	SignalImageFsInodesFree Signal = pressure.ImageFsInodesFree
	// SignalPIDAvailable is the process IDs left: pid_max less the
	// processes running.
	SignalPIDAvailable Signal = pressure.PIDAvailable
)

// Kubelet's names for the resources that are not API resource names.
const (
	ResourceInodes = pressure.ResourceInodes
	ResourcePIDs   = pressure.ResourcePIDs
)

// info returns s's row of the signal table; ok is false for a signal the
// manager does not know.
func (s Signal) info() (info pressure.Signal, ok bool) { return pressure.Lookup(string(s)) }

// Signals returns the signals the manager knows, sorted.
func Signals() []Signal {
	all := pressure.Signals()
	out := make([]Signal, len(all))
	for i := range all {
		out[i] = Signal(all[i].Name)
	}
	return out
}

// Condition is the node condition a threshold of s drives
// (MemoryPressure, DiskPressure or PIDPressure).
func (s Signal) Condition() corev1.NodeConditionType {
	info, _ := s.info()
	return info.Condition
}

// Resource is what an eviction for s reclaims: memory,
// ephemeral-storage, inodes or pids, as kubelet names them in its
// eviction messages.
func (s Signal) Resource() corev1.ResourceName {
	info, _ := s.info()
	return info.Resource
}

// Value is a threshold or minimum-reclaim amount: a quantity, or a
// fraction of the signal's capacity.
type Value struct {
	// Quantity, when not nil, is the amount in the signal's unit (bytes,
	// inodes, PIDs).
	Quantity *resource.Quantity
	// Percentage is the fraction of capacity, in (0, 1), when Quantity is
	// nil. Kept in float32 as kubelet keeps it, so a percentage of a
	// capacity comes out to the byte kubelet computes.
	Percentage float32
}

// amount is v in the signal's unit for a capacity.
func (v Value) amount(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * float64(v.Percentage))
}

// quantity is v as kubelet prints it in an eviction message: a quantity as
// it was written, a percentage as bytes of the capacity.
func (v Value) quantity(capacity int64) resource.Quantity {
	if v.Quantity != nil {
		return v.Quantity.DeepCopy()
	}
	return *resource.NewQuantity(v.amount(capacity), resource.BinarySI)
}

// String is the value as configured: "100Mi" or "10%".
func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	s := strconv.FormatFloat(float64(v.Percentage)*100, 'f', 4, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}

// Threshold is one eviction threshold: met while what Signal has
// available is less than Value.
type Threshold struct {
	Signal Signal
	Value  Value
	// GracePeriod is how long a soft threshold must hold before it drives
	// an eviction. Zero for a hard threshold.
	GracePeriod time.Duration
	// MinReclaim, when not nil, is what must be available beyond Value
	// before a threshold that drove an eviction stops counting as met.
	MinReclaim *Value
}

// Hard reports whether t is a hard threshold: one without a grace period,
// as kubelet tells them apart.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

// String is t in kubelet's flag syntax, "memory.available<100Mi".
func (t Threshold) String() string { return string(t.Signal) + "<" + t.Value.String() }

// ParseThresholds parses kubelet's evictionHard, evictionSoft,
// evictionSoftGracePeriod and evictionMinimumReclaim settings, each a map
// from signal to a value: "100Mi" or "10%" for thresholds and minimum
// reclaims, a Go duration ("1m30s") for grace periods. As kubelet: "0%" and
// "100%" thresholds are ignored; other percentages must be within (0%,
// 100%], quantities positive; a soft threshold needs a grace period (not
// negative); a minimum reclaim applies to the hard and soft thresholds of
// its signal, a quantity not negative, a percentage within (0%, 100%]. Errors name the setting and the
// signal. The thresholds come hard first, then soft, each sorted by signal.
func ParseThresholds(hard, soft, softGracePeriod, minimumReclaim map[string]string) ([]Threshold, error) {
	hardTs, err := parseStatements("evictionHard", hard)
	if err != nil {
		return nil, err
	}
	softTs, err := parseStatements("evictionSoft", soft)
	if err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(softGracePeriod) {
		if _, ok := Signal(k).info(); !ok {
			return nil, fmt.Errorf("eviction: evictionSoftGracePeriod[%q]: unsupported eviction signal", k)
		}
	}
	for i := range softTs {
		s := softTs[i].Signal
		v, ok := softGracePeriod[string(s)]
		if !ok {
			return nil, fmt.Errorf("eviction: evictionSoft[%q]: grace period must be specified for the soft eviction threshold in evictionSoftGracePeriod", s)
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("eviction: evictionSoftGracePeriod[%q]: %q is not a duration", s, v)
		}
		if d < 0 {
			return nil, fmt.Errorf("eviction: evictionSoftGracePeriod[%q]: %q must not be negative", s, v)
		}
		softTs[i].GracePeriod = d
	}
	out := append(hardTs, softTs...)
	for _, k := range sortedKeys(minimumReclaim) {
		s := Signal(k)
		if _, ok := s.info(); !ok {
			return nil, fmt.Errorf("eviction: evictionMinimumReclaim[%q]: unsupported eviction signal", k)
		}
		v, err := parseMinReclaim(k, strings.TrimSpace(minimumReclaim[k]))
		if err != nil {
			return nil, err
		}
		for i := range out {
			if out[i].Signal == s {
				out[i].MinReclaim = &v
			}
		}
	}
	return out, nil
}

// WithAllocatable returns ts with an allocatableMemory.available threshold
// for every hard memory.available one (same value and minimum reclaim), as
// kubelet adds them when it enforces node allocatable on pods
// (enforceNodeAllocatable contains "pods").
func WithAllocatable(ts []Threshold) []Threshold {
	out := slices.Clone(ts)
	for _, t := range ts {
		if t.Signal == SignalMemoryAvailable && t.Hard() {
			out = append(out, Threshold{Signal: SignalAllocatableMemoryAvailable, Value: t.Value, MinReclaim: t.MinReclaim})
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func parseStatements(field string, m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, k := range sortedKeys(m) {
		s := Signal(k)
		if _, ok := s.info(); !ok {
			return nil, fmt.Errorf("eviction: %s[%q]: unsupported eviction signal", field, k)
		}
		q, percent, err := pressure.ParseThreshold(m[k])
		switch {
		case errors.Is(err, pressure.ErrIgnored):
			continue
		case err != nil:
			return nil, fmt.Errorf("eviction: %s[%q]: %w", field, k, err)
		}
		out = append(out, Threshold{Signal: s, Value: Value{Quantity: q, Percentage: float32(percent) / 100}})
	}
	return out, nil
}

func parseMinReclaim(k, v string) (Value, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 32)
		if err != nil {
			return Value{}, fmt.Errorf("eviction: evictionMinimumReclaim[%q]: %q is not a percentage", k, v)
		}
		pct := float32(f) / 100
		if pct <= 0 || pct > 1 {
			return Value{}, fmt.Errorf("eviction: evictionMinimumReclaim[%q]: percentage must be positive and at most 100%%: %s", k, v)
		}
		return Value{Percentage: pct}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return Value{}, fmt.Errorf("eviction: evictionMinimumReclaim[%q]: %q is not a quantity or percentage", k, v)
	}
	if q.Sign() < 0 {
		return Value{}, fmt.Errorf("eviction: evictionMinimumReclaim[%q]: must not be negative: %s", k, v)
	}
	return Value{Quantity: &q}, nil
}
