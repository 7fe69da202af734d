package pressure

import (
	"cmp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSignalTable(t *testing.T) {
	all := Signals()
	if !slices.IsSortedFunc(all[:], func(a, b Signal) int { return cmp.Compare(a.Name, b.Name) }) {
		t.Errorf("signals not sorted by name: %v", all)
	}
	for _, s := range all {
		if got, ok := Lookup(s.Name); !ok || got != s {
			t.Errorf("Lookup(%q) = %v, %v", s.Name, got, ok)
		}
		if ConditionIndex(s.Condition) < 0 {
			t.Errorf("%s: %q is not a pressure condition", s.Name, s.Condition)
		}
		var want corev1.NodeConditionType
		switch {
		case s.Memory():
			want = corev1.NodeMemoryPressure
		case s.Disk():
			want = corev1.NodeDiskPressure
		case s.Source == SourcePIDs:
			want = corev1.NodePIDPressure
		}
		if s.Condition != want {
			t.Errorf("%s: condition %q, its resource and source say %q", s.Name, s.Condition, want)
		}
	}
	if _, ok := Lookup("memory.free"); ok {
		t.Error("Lookup of an unknown signal succeeded")
	}
	for k := range DefaultEvictionHard() {
		if _, ok := Lookup(k); !ok {
			t.Errorf("default threshold of unknown signal %q", k)
		}
	}
}

func TestConditions(t *testing.T) {
	want := []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}
	for i, c := range Conditions() {
		if c.Type != want[i] {
			t.Errorf("Conditions()[%d] = %q, want %q", i, c.Type, want[i])
		}
		if ConditionIndex(c.Type) != i {
			t.Errorf("ConditionIndex(%q) = %d, want %d", c.Type, ConditionIndex(c.Type), i)
		}
		if got, ok := LookupCondition(c.Type); !ok || got != c {
			t.Errorf("LookupCondition(%q) = %v, %v", c.Type, got, ok)
		}
	}
	if ConditionIndex(corev1.NodeReady) != -1 {
		t.Error("Ready is not a pressure condition")
	}
	if _, ok := LookupCondition(corev1.NodeReady); ok {
		t.Error("LookupCondition(Ready) succeeded")
	}
}
