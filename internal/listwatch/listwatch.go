// Package listwatch builds the field-selected list-and-watch a node agent
// keeps of its own objects (its Node, the pods bound to it).
package listwatch

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Selected returns a ListerWatcher that lists and watches with
// fieldSelector applied to every request. It always uses a plain LIST and
// WATCH, never the streaming list (WatchList): what a node selects is small
// (one Node, the pods of one node), and plain requests work the same on
// every client, the fake clientset included, whose typed clients do not
// serve the streaming list's initial-events bookmark.
func Selected[L runtime.Object](
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	fieldSelector string,
) cache.ListerWatcher {
	return plain{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fieldSelector
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fieldSelector
			return watchFn(ctx, o)
		},
	}}
}

// plain marks a ListWatch as not serving the streaming list, so a reflector
// falls back to LIST and WATCH.
type plain struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells client-go's reflector to use LIST
// and WATCH.
func (plain) IsWatchListSemanticsUnSupported() bool { return true }
