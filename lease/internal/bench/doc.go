// Package bench compares one node lease renewal by nodekit's lease package
// with k8s.io/component-helpers/apimachinery/lease's controller, side by side
// on the same fake clientset. It is a module of its own so that the library's
// go.mod does not depend on component-helpers.
//
//	cd lease/internal/bench && go test -run '^$' -bench . -benchmem -count 6 -benchtime 0.2s
package bench
