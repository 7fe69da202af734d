package heartbeat_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/heartbeat"
)

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
)

// fill sets every field reachable from v to a non-zero value: one element
// per slice and map, quantities and times included.
func fill(v reflect.Value) {
	switch {
	case v.Type() == quantityType:
		v.Set(reflect.ValueOf(resource.MustParse("1")))
		return
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(metav1.Unix(1000, 0)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}

// mutations calls visit for every leaf reachable from the status, with a
// function that returns a copy of full with that leaf changed.
func mutations(full *corev1.NodeStatus, visit func(path string, changed *corev1.NodeStatus)) {
	var walk func(path string, get func(*corev1.NodeStatus) reflect.Value, t reflect.Type)
	walk = func(path string, get func(*corev1.NodeStatus) reflect.Value, t reflect.Type) {
		mutate := func(change func(reflect.Value)) {
			c := full.DeepCopy()
			change(get(c))
			visit(path, c)
		}
		switch {
		case t == quantityType:
			mutate(func(v reflect.Value) { v.Set(reflect.ValueOf(resource.MustParse("2"))) })
			return
		case t == timeType:
			mutate(func(v reflect.Value) { v.Set(reflect.ValueOf(metav1.Unix(2000, 0))) })
			return
		}
		switch t.Kind() {
		case reflect.String:
			mutate(func(v reflect.Value) { v.SetString("y") })
		case reflect.Bool:
			mutate(func(v reflect.Value) { v.SetBool(false) })
		case reflect.Int, reflect.Int32, reflect.Int64:
			mutate(func(v reflect.Value) { v.SetInt(2) })
		case reflect.Pointer:
			mutate(func(v reflect.Value) { v.Set(reflect.Zero(t)) })
			walk(path, func(s *corev1.NodeStatus) reflect.Value { return get(s).Elem() }, t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				if f := t.Field(i); f.IsExported() {
					walk(path+"."+f.Name, func(s *corev1.NodeStatus) reflect.Value { return get(s).Field(i) }, f.Type)
				}
			}
		case reflect.Slice:
			mutate(func(v reflect.Value) { v.Set(reflect.Zero(t)) })
			walk(path+"[0]", func(s *corev1.NodeStatus) reflect.Value { return get(s).Index(0) }, t.Elem())
		case reflect.Map:
			mutate(func(v reflect.Value) { v.Set(reflect.Zero(t)) })
			mutate(func(v reflect.Value) {
				for _, k := range v.MapKeys() {
					e := reflect.New(t.Elem()).Elem()
					if t.Elem() == quantityType {
						e.Set(reflect.ValueOf(resource.MustParse("3")))
					}
					v.SetMapIndex(k, e)
				}
			})
		}
	}
	walk("status", func(s *corev1.NodeStatus) reflect.Value { return reflect.ValueOf(s).Elem() }, reflect.TypeFor[corev1.NodeStatus]())
}

// StatusChanged compares fields one by one; this checks that it sees a
// change in every field of NodeStatus (a field added to the API would fail
// here), and ignores only the conditions' heartbeat times.
func TestStatusChangedSeesEveryField(t *testing.T) {
	var full corev1.NodeStatus
	fill(reflect.ValueOf(&full).Elem())
	if heartbeat.StatusChanged(&full, full.DeepCopy()) {
		t.Fatal("a copy counts as changed")
	}
	n := 0
	mutations(&full, func(path string, changed *corev1.NodeStatus) {
		n++
		ignored := path == "status.Conditions[0].LastHeartbeatTime"
		if got := heartbeat.StatusChanged(&full, changed); got == ignored {
			t.Errorf("%s changed: StatusChanged = %v", path, got)
		}
	})
	if n < 40 {
		t.Fatalf("only %d mutations", n)
	}
}
