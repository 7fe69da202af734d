package nodekit

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// EventRecorder is an agent's record.EventRecorder and the Runnable that
// sends its events: to the API server as component "kubelet" on the node's
// host, as the kubelet's are (Pulled, Started, Killing, Unhealthy, ...).
// Parts take it when they are built; it drops what they record until Run
// starts its broadcaster, and after Run returns, so building an agent
// starts no goroutine.
type EventRecorder struct {
	sink record.EventSink
	host string
	to   atomic.Pointer[record.EventRecorder]
}

var (
	_ record.EventRecorder = (*EventRecorder)(nil)
	_ Runnable             = (*EventRecorder)(nil)
)

// NewEventRecorder returns a recorder of events to sink (Client.EventSink),
// from host. The objects events are about are named by NewScheme's kinds.
func NewEventRecorder(sink record.EventSink, host string) *EventRecorder {
	return &EventRecorder{sink: sink, host: host}
}

// Run records events until ctx ends.
func (r *EventRecorder) Run(ctx context.Context) error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(r.sink)
	var rec record.EventRecorder = b.NewRecorder(scheme, corev1.EventSource{Component: "kubelet", Host: r.host})
	r.to.Store(&rec)
	<-ctx.Done()
	r.to.Store(nil)
	b.Shutdown()
	return nil
}

// Event records an event about object.
func (r *EventRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	if rec := r.to.Load(); rec != nil {
		(*rec).Event(object, eventtype, reason, message)
	}
}

// Eventf records an event about object with a formatted message.
func (r *EventRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if rec := r.to.Load(); rec != nil {
		(*rec).Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

// AnnotatedEventf is Eventf with annotations on the event.
func (r *EventRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if rec := r.to.Load(); rec != nil {
		(*rec).AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
