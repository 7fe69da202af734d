package nodekit

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// EventSink returns a record.EventSink that writes each event to its own
// namespace, as client-go's EventSinkImpl over Events("") does.
func (c *Client) EventSink() record.EventSink {
	return eventSink{c.resource("events", "", true)}
}

type eventSink struct{ res }

var _ record.EventSink = eventSink{}

func (s eventSink) in(e *corev1.Event) res {
	r := s.res
	r.ns = e.Namespace
	return r
}

// The broadcaster gives no context: its requests end with the HTTP
// client's timeout (rest.Config.Timeout), as client-go's sink's do.

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.in(e).req(http.MethodPost).Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.in(e).req(http.MethodPut).Name(e.Name).Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	r := s.in(e)
	out := &corev1.Event{}
	err := r.rc.Patch(types.StrategicMergePatchType).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.name).
		Name(e.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}
