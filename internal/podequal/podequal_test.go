package podequal

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	timeType     = reflect.TypeFor[metav1.Time]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	base         = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// fill sets every field of v, as deep as depth goes: every slice and map
// holds one element, every pointer points, every string and number is set.
func fill(v reflect.Value, depth int) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(metav1.NewTime(base)))
		return
	case v.Type() == quantityType:
		v.Set(reflect.ValueOf(resource.MustParse("1")))
		return
	}
	if depth == 0 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth-1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth-1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth-1)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth-1)
		fill(e, depth-1)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	}
}

// change is one way to change a filled value: where names the field.
type change struct {
	where string
	do    func(root reflect.Value)
}

// changes lists one change of every field reachable from a value of type t
// at path (a function from the root to the value), to depth.
func changes(t reflect.Type, where string, at func(reflect.Value) reflect.Value, depth int) []change {
	switch {
	case t == timeType:
		return []change{{where, func(r reflect.Value) {
			v := at(r)
			v.Set(reflect.ValueOf(metav1.NewTime(v.Interface().(metav1.Time).Add(time.Second))))
		}}}
	case t == quantityType:
		return []change{{where, func(r reflect.Value) { at(r).Set(reflect.ValueOf(resource.MustParse("2"))) }}}
	}
	if depth == 0 {
		return nil
	}
	var out []change
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			i := i
			out = append(out, changes(t.Field(i).Type, where+"."+t.Field(i).Name,
				func(r reflect.Value) reflect.Value { return at(r).Field(i) }, depth-1)...)
		}
	case reflect.Pointer:
		out = append(out, change{where + "=nil", func(r reflect.Value) { v := at(r); v.Set(reflect.Zero(v.Type())) }})
		out = append(out, changes(t.Elem(), where, func(r reflect.Value) reflect.Value { return at(r).Elem() }, depth-1)...)
	case reflect.Slice:
		out = append(out, change{where + "=[]", func(r reflect.Value) { v := at(r); v.Set(reflect.MakeSlice(v.Type(), 0, 0)) }})
		out = append(out, changes(t.Elem(), where+"[0]", func(r reflect.Value) reflect.Value { return at(r).Index(0) }, depth-1)...)
	case reflect.Map:
		out = append(out, change{where + "={}", func(r reflect.Value) { v := at(r); v.Set(reflect.MakeMap(v.Type())) }})
	case reflect.String:
		out = append(out, change{where, func(r reflect.Value) { v := at(r); v.SetString(v.String() + "x") }})
	case reflect.Bool:
		out = append(out, change{where, func(r reflect.Value) { v := at(r); v.SetBool(!v.Bool()) }})
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		out = append(out, change{where, func(r reflect.Value) { v := at(r); v.SetInt(v.Int() + 1) }})
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		out = append(out, change{where, func(r reflect.Value) { v := at(r); v.SetUint(v.Uint() + 1) }})
	}
	return out
}

const depth = 8

// Every field of a pod status, a field added to the API later included,
// tells two statuses apart as the semantic comparison does.
func TestEveryFieldCounts(t *testing.T) {
	var full corev1.PodStatus
	fill(reflect.ValueOf(&full).Elem(), depth)
	if !Status(&full, full.DeepCopy()) {
		t.Fatal("a copy of a full status differs")
	}
	all := changes(reflect.TypeFor[corev1.PodStatus](), "status", func(r reflect.Value) reflect.Value { return r }, depth)
	if len(all) < 100 {
		t.Fatalf("only %d fields found", len(all))
	}
	for _, c := range all {
		changed := full.DeepCopy()
		c.do(reflect.ValueOf(changed).Elem())
		want := equality.Semantic.DeepEqual(full, *changed)
		if got := Status(&full, changed); got != want {
			t.Errorf("%s changed: Status says equal %v, the semantic comparison %v", c.where, got, want)
		}
		if got := Status(changed, &full); got != want {
			t.Errorf("%s changed (the other way round): Status says equal %v, the semantic comparison %v", c.where, got, want)
		}
	}
}

// The semantic rules: empty equals nil, an instant in any location, a
// quantity by its value.
func TestSemanticRules(t *testing.T) {
	at := metav1.NewTime(base)
	elsewhere := metav1.NewTime(base.In(time.FixedZone("x", 3600)))
	a := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &at,
		Conditions:         []corev1.PodCondition{{Type: corev1.PodReady, LastTransitionTime: at}},
		ContainerStatuses:  []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}},
		HostIPs:            []corev1.HostIP{},
		AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}}
	b := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &elsewhere,
		Conditions:         []corev1.PodCondition{{Type: corev1.PodReady, LastTransitionTime: elsewhere}},
		ContainerStatuses:  []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: elsewhere}}}},
		AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	if !equality.Semantic.DeepEqual(a, b) {
		t.Fatal("the case is wrong: semantically different")
	}
	if !Status(&a, &b) || !Status(&b, &a) {
		t.Error("semantically equal statuses differ")
	}
	b.ContainerStatuses[0].State.Running = nil
	if Status(&a, &b) {
		t.Error("a running container equals one with no state")
	}
}

func TestChangesCoverNestedFields(t *testing.T) {
	var names []string
	for _, c := range changes(reflect.TypeFor[corev1.PodStatus](), "status", func(r reflect.Value) reflect.Value { return r }, depth) {
		names = append(names, c.where)
	}
	joined := strings.Join(names, "\n")
	for _, want := range []string{"status.ContainerStatuses[0].State.Terminated.FinishedAt", "status.Conditions[0].LastProbeTime",
		"status.InitContainerStatuses[0].LastTerminationState.Waiting.Message", "status.Resources.Claims[0].Name"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no change of %s", want)
		}
	}
}

// A running pod's status as a node writes it.
func running() *corev1.PodStatus {
	at := metav1.NewTime(base)
	s := &corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}},
		PodIP: "10.88.0.2", PodIPs: []corev1.PodIP{{IP: "10.88.0.2"}}, StartTime: &at, QOSClass: corev1.PodQOSBestEffort,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "registry.local/pause:1", ImageID: "sim://registry.local/pause:1",
			ContainerID: "sim://container-000002", Ready: true, Started: new(bool),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}}}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: at})
	}
	return s
}

func BenchmarkStatus(b *testing.B) {
	a, c := running(), running()
	b.Run("podequal", func(b *testing.B) {
		for range b.N {
			Status(a, c)
		}
	})
	b.Run("semantic", func(b *testing.B) {
		for range b.N {
			equality.Semantic.DeepEqual(*a, *c)
		}
	})
}
