package nodekit_test

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit"
)

// managedPod is a pod as the API server answers it: with managed fields
// beside everything else.
func managedPod(name string) *corev1.Pod {
	t := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 1, CreationTimestamp: t,
			Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"note": "n"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}},
			Finalizers:      []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{}}}`)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}},
			},
		},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "i",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.2",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t}}},
	}
}

func withoutManaged(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.ManagedFields = nil
	return p
}

// The client decodes objects without their managed fields, in protobuf
// and in JSON, alone, in lists and in watch events; the rest is intact.
func TestDecodeLeavesOutManagedFields(t *testing.T) {
	for _, mediaType := range []string{nodekit.ContentTypeProtobuf, nodekit.ContentTypeJSON} {
		t.Run(mediaType, func(t *testing.T) {
			_, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Query().Get("watch") == "true":
					info := s.info(mediaType)
					w.Header().Set("Content-Type", mediaType+";stream=watch")
					w.WriteHeader(http.StatusOK)
					enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(w), s.codecs.EncoderForVersion(info.StreamSerializer.Serializer, corev1.SchemeGroupVersion))
					raw, err := runtime.Encode(s.codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), managedPod("w"))
					if err != nil {
						t.Error(err)
					}
					if err := enc.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: raw}}); err != nil {
						t.Error(err)
					}
				case r.URL.Path == "/api/v1/namespaces/ns/pods":
					s.write(w, http.StatusOK, mediaType, corev1.SchemeGroupVersion, &corev1.PodList{
						ListMeta: metav1.ListMeta{ResourceVersion: "43"}, Items: []corev1.Pod{*managedPod("a"), *managedPod("b")}})
				default:
					s.write(w, http.StatusOK, mediaType, corev1.SchemeGroupVersion, managedPod("p"))
				}
			})
			p, err := c.Pods("ns").Get(ctx(t), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := withoutManaged(managedPod("p")); !equality.Semantic.DeepEqual(p, want) {
				t.Errorf("got %+v\nwant %+v", p, want)
			}
			list, err := c.Pods("ns").List(ctx(t), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 2 || list.ResourceVersion != "43" ||
				!equality.Semantic.DeepEqual(&list.Items[0], withoutManaged(managedPod("a"))) ||
				!equality.Semantic.DeepEqual(&list.Items[1], withoutManaged(managedPod("b"))) {
				t.Errorf("list %+v", list)
			}
			wi, err := c.Pods("ns").Watch(ctx(t), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer wi.Stop()
			e, ok := <-wi.ResultChan()
			if !ok {
				t.Fatal("no watch event")
			}
			if got, ok := e.Object.(*corev1.Pod); !ok || e.Type != watch.Modified || !equality.Semantic.DeepEqual(got, withoutManaged(managedPod("w"))) {
				t.Errorf("event %s %+v", e.Type, e.Object)
			}
		})
	}
}
