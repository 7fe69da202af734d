package nodekit

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// withoutManagedFieldsSerializer is the client's negotiated serializer: what
// its decoders return has no metadata.managedFields (nor have a list's
// items). Nothing in a node reads them, they are much of an object's
// decoded size, and an update sent without them leaves the API's as they
// are; so a caller that keeps what it read (a watch's store) need not copy
// an object to drop them.
type withoutManagedFieldsSerializer struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newWithoutManagedFieldsSerializer(ns runtime.NegotiatedSerializer) withoutManagedFieldsSerializer {
	infos := append([]runtime.SerializerInfo(nil), ns.SupportedMediaTypes()...)
	for i := range infos {
		infos[i].Serializer = leanDecoder{infos[i].Serializer}
	}
	return withoutManagedFieldsSerializer{NegotiatedSerializer: ns, infos: infos}
}

func (s withoutManagedFieldsSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return s.infos
}

// leanDecoder decodes as its Serializer does, then drops managed fields.
type leanDecoder struct{ runtime.Serializer }

func (d leanDecoder) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, kind, err := d.Serializer.Decode(data, gvk, into)
	if err == nil {
		dropManagedFields(obj)
	}
	return obj, kind, err
}

func dropManagedFields(obj runtime.Object) {
	if meta.IsListType(obj) {
		_ = meta.EachListItem(obj, func(item runtime.Object) error {
			dropManagedFields(item)
			return nil
		})
		return
	}
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
}
