package nodestatus

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/internal/pressure"
)

// threshold is one hard eviction threshold: the signal is met while what is
// available is less than the threshold's quantity.
type threshold struct {
	signal    string
	fact      Fact
	condition corev1.NodeConditionType
	quantity  *resource.Quantity // nil for a percentage
	percent   float64            // of capacity, in (0, 1], when quantity is nil
	observe   func(f *HostFacts) (available, capacity uint64)
}

// limit returns the threshold in the signal's unit for a given capacity.
func (t *threshold) limit(capacity uint64) int64 {
	if t.quantity == nil {
		return int64(float64(capacity) * t.percent)
	}
	return t.quantity.Value()
}

// met reports whether the threshold is met, or the fact it needs is missing.
func (t *threshold) met(f *HostFacts) (bool, error) {
	if err := f.Err(t.fact); err != nil {
		return false, err
	}
	avail, capacity := t.observe(f)
	return int64(avail) < t.limit(capacity), nil
}

// observeHost returns how the host facts observe a signal: the fact it
// needs and what is available of its capacity. ok is false for a signal
// the host facts have no observation for (allocatableMemory.available).
func observeHost(s pressure.Signal) (fact Fact, observe func(f *HostFacts) (available, capacity uint64), ok bool) {
	switch s.Source {
	case pressure.SourceMemory:
		return FactMemory, func(f *HostFacts) (uint64, uint64) { return f.MemoryAvailable, f.MemoryTotal }, true
	case pressure.SourceNodeFS:
		if s.Inodes() {
			return FactNodeFS, func(f *HostFacts) (uint64, uint64) { return f.NodeFS.InodesFree, f.NodeFS.Inodes }, true
		}
		return FactNodeFS, func(f *HostFacts) (uint64, uint64) { return f.NodeFS.Available, f.NodeFS.Capacity }, true
	case pressure.SourceImageFS:
		if s.Inodes() {
			return FactImageFS, func(f *HostFacts) (uint64, uint64) { return f.ImageFS.InodesFree, f.ImageFS.Inodes }, true
		}
		return FactImageFS, func(f *HostFacts) (uint64, uint64) { return f.ImageFS.Available, f.ImageFS.Capacity }, true
	case pressure.SourcePIDs:
		return FactPIDs, func(f *HostFacts) (uint64, uint64) {
			if f.PIDsInUse >= f.PIDMax {
				return 0, f.PIDMax
			}
			return f.PIDMax - f.PIDsInUse, f.PIDMax
		}, true
	}
	return "", nil, false
}

type thresholds []threshold

// defaultThresholds returns DefaultEvictionHard parsed, once per process:
// thresholds are read-only after parsing, so every setter list built with
// the defaults shares them (a fleet of simulated nodes saves their parsing
// and about 2 KiB per node).
var defaultThresholds = sync.OnceValue(func() thresholds {
	ts, err := parseThresholds(DefaultEvictionHard())
	if err != nil {
		panic("nodestatus: default eviction thresholds: " + err.Error())
	}
	return ts
})

func parseThresholds(m map[string]string) (thresholds, error) {
	type entry struct {
		key       string
		condition corev1.NodeConditionType // "" when unsupported
		fact      Fact
		observe   func(f *HostFacts) (available, capacity uint64)
	}
	entries := make([]entry, 0, len(m))
	for k := range m {
		e := entry{key: k}
		if sig, ok := pressure.Lookup(k); ok {
			if fact, observe, ok := observeHost(sig); ok {
				e.condition, e.fact, e.observe = sig.Condition, fact, observe
			}
		}
		entries = append(entries, e)
	}
	// Unsupported signals first; then by condition, then signal: each
	// condition's thresholds are contiguous, so forCondition returns a part
	// of the slice.
	sort.Slice(entries, func(i, j int) bool {
		if ci, cj := entries[i].condition, entries[j].condition; ci != cj {
			return ci < cj
		}
		return entries[i].key < entries[j].key
	})
	var out thresholds
	for _, e := range entries {
		if e.condition == "" {
			return nil, fmt.Errorf("nodestatus: Options.EvictionHard[%q]: unsupported signal", e.key)
		}
		q, percent, err := pressure.ParseThreshold(m[e.key])
		switch {
		case errors.Is(err, pressure.ErrIgnored):
			continue
		case err != nil:
			return nil, fmt.Errorf("nodestatus: Options.EvictionHard[%q]: %w", e.key, err)
		}
		out = append(out, threshold{signal: e.key, fact: e.fact, condition: e.condition, quantity: q, percent: percent / 100, observe: e.observe})
	}
	return out, nil
}

// forCondition returns the thresholds of condition c: a part of ts, which
// parseThresholds ordered by condition.
func (ts thresholds) forCondition(c corev1.NodeConditionType) thresholds {
	i := 0
	for i < len(ts) && ts[i].condition != c {
		i++
	}
	j := i
	for j < len(ts) && ts[j].condition == c {
		j++
	}
	if i == j {
		return nil
	}
	return ts[i:j:j]
}

// reservation returns what the hard thresholds take from allocatable, as
// kubelet: memory.available from memory, nodefs.available from
// ephemeral-storage, each against its capacity.
func (ts thresholds) reservation(resourceName corev1.ResourceName, capacity uint64) int64 {
	var signal string
	switch resourceName {
	case corev1.ResourceMemory:
		signal = pressure.MemoryAvailable
	case corev1.ResourceEphemeralStorage:
		signal = pressure.NodeFsAvailable
	default:
		return 0
	}
	for i := range ts {
		if ts[i].signal == signal {
			return ts[i].limit(capacity)
		}
	}
	return 0
}
