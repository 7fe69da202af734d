package main

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// eventRecorder is the pod half's record.EventRecorder. Its parts take it
// when they are built; it sends events (kubelet's Pulled, Started, Killing,
// Unhealthy, ...) to the API server as component "kubelet" on the node's
// host once run starts the broadcaster, and drops them before that and in
// standalone mode, so building an agent starts no goroutine.
type eventRecorder struct {
	to atomic.Pointer[record.EventRecorder]
}

var _ record.EventRecorder = (*eventRecorder)(nil)

// start records events to sink until stop is called; scheme names the
// kinds of the objects they are about (it must know Pod and Node).
func (r *eventRecorder) start(ctx context.Context, sink record.EventSink, scheme *runtime.Scheme, host string) (stop func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(sink)
	var rec record.EventRecorder = b.NewRecorder(scheme, corev1.EventSource{Component: "kubelet", Host: host})
	r.to.Store(&rec)
	return func() {
		r.to.Store(nil)
		b.Shutdown()
	}
}

func (r *eventRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	if rec := r.to.Load(); rec != nil {
		(*rec).Event(object, eventtype, reason, message)
	}
}

func (r *eventRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if rec := r.to.Load(); rec != nil {
		(*rec).Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

func (r *eventRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if rec := r.to.Load(); rec != nil {
		(*rec).AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
