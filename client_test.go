package nodekit_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/podsync/volume"
)

// The client's resource clients are the clients nodekit's packages
// declare.
var (
	_ heartbeat.NodeClient        = (*nodekit.NodeResource)(nil)
	_ fleet.NodeClient            = (*nodekit.NodeResource)(nil)
	_ lease.LeaseClient           = (*nodekit.LeaseResource)(nil)
	_ fleet.LeaseClient           = (*nodekit.LeaseResource)(nil)
	_ podsource.APIPodClient      = (*nodekit.PodResource)(nil)
	_ podsource.MirrorPodClient   = (*nodekit.PodResource)(nil)
	_ podsource.NodeClient        = (*nodekit.NodeResource)(nil)
	_ status.PodClient            = (*nodekit.PodResource)(nil)
	_ volume.SecretClient         = (*nodekit.SecretResource)(nil)
	_ volume.ConfigMapClient      = (*nodekit.ConfigMapResource)(nil)
	_ volume.ServiceClient        = (*nodekit.ServiceResource)(nil)
	_ volume.ServiceAccountClient = (*nodekit.ServiceAccountResource)(nil)
)

// request is what the test server saw of one request.
type request struct {
	method, path, query, contentType, accept string
	body                                     []byte
}

// server is an httptest API server whose answer is set per test.
type server struct {
	t      *testing.T
	codecs serializer.CodecFactory
	mu     sync.Mutex
	reqs   []request
	answer func(w http.ResponseWriter, r *http.Request)
}

func newServer(t *testing.T, answer func(s *server, w http.ResponseWriter, r *http.Request)) (*server, *nodekit.Client) {
	t.Helper()
	scheme, err := nodekit.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, codecs: serializer.NewCodecFactory(scheme)}
	s.answer = func(w http.ResponseWriter, r *http.Request) { answer(s, w, r) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), body})
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.answer(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := nodekit.NewClient(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func (s *server) last() request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		s.t.Fatal("no request")
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *server) info(mediaType string) runtime.SerializerInfo {
	info, ok := runtime.SerializerInfoForMediaType(s.codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		s.t.Fatalf("no serializer for %s", mediaType)
	}
	return info
}

// write answers obj in mediaType.
func (s *server) write(w http.ResponseWriter, code int, mediaType string, gv schema.GroupVersion, obj runtime.Object) {
	b, err := runtime.Encode(s.codecs.EncoderForVersion(s.info(mediaType).Serializer, gv), obj)
	if err != nil {
		s.t.Error(err)
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// decode decodes a request body of mediaType into into.
func (s *server) decode(mediaType string, body []byte, into runtime.Object) {
	s.t.Helper()
	if _, _, err := s.codecs.UniversalDeserializer().Decode(body, nil, into); err != nil {
		s.t.Fatalf("decode %s body: %v", mediaType, err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// Reads ask for protobuf first and decode a protobuf answer.
func TestGetProtobuf(t *testing.T) {
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		s.write(w, http.StatusOK, nodekit.ContentTypeProtobuf, corev1.SchemeGroupVersion,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}, Status: corev1.NodeStatus{Phase: corev1.NodeRunning}})
	})
	n, err := c.Nodes().Get(ctx(t), "n1", metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "n1" || n.UID != "u1" || n.Status.Phase != corev1.NodeRunning {
		t.Errorf("got %+v", n)
	}
	r := s.last()
	if r.method != http.MethodGet || r.path != "/api/v1/nodes/n1" || r.query != "resourceVersion=0" {
		t.Errorf("request %s %s?%s", r.method, r.path, r.query)
	}
	if !strings.HasPrefix(r.accept, nodekit.ContentTypeProtobuf+",") || !strings.Contains(r.accept, nodekit.ContentTypeJSON) {
		t.Errorf("Accept %q, want protobuf then JSON", r.accept)
	}
}

// Creates and updates send protobuf bodies; a JSON answer is decoded too.
func TestCreateUpdateProtobufBody(t *testing.T) {
	now := metav1.NewMicroTime(time.Date(2026, 1, 1, 0, 0, 0, 123000, time.UTC))
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		var l coordinationv1.Lease
		s.decode(r.Header.Get("Content-Type"), s.last().body, &l)
		l.ResourceVersion = "7"
		s.write(w, http.StatusCreated, nodekit.ContentTypeJSON, coordinationv1.SchemeGroupVersion, &l)
	})
	in := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
	}
	leases := c.Leases("kube-node-lease")
	got, err := leases.Create(ctx(t), in, metav1.CreateOptions{FieldManager: "m"})
	if err != nil {
		t.Fatal(err)
	}
	r := s.last()
	if r.method != http.MethodPost || r.path != "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases" || r.query != "fieldManager=m" {
		t.Errorf("request %s %s?%s", r.method, r.path, r.query)
	}
	if r.contentType != nodekit.ContentTypeProtobuf || !bytes.HasPrefix(r.body, []byte("k8s\x00")) {
		t.Errorf("body of type %q starting %q, want protobuf", r.contentType, r.body[:min(4, len(r.body))])
	}
	if got.ResourceVersion != "7" || *got.Spec.HolderIdentity != "n1" || !got.Spec.RenewTime.Equal(&now) {
		t.Errorf("round trip: %+v", got)
	}
	if _, err := leases.Update(ctx(t), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.method != http.MethodPut || r.path != "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1" || r.contentType != nodekit.ContentTypeProtobuf {
		t.Errorf("update %s %s (%s)", r.method, r.path, r.contentType)
	}
}

// Patches are sent as given, with their patch type, to the subresource.
func TestPatchSubresource(t *testing.T) {
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		s.write(w, http.StatusOK, nodekit.ContentTypeProtobuf, corev1.SchemeGroupVersion,
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	})
	patch := []byte(`{"status":{"phase":"Running"}}`)
	p, err := c.Pods("ns").Patch(ctx(t), "p", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	r := s.last()
	if r.method != http.MethodPatch || r.path != "/api/v1/namespaces/ns/pods/p/status" || r.contentType != string(types.StrategicMergePatchType) || !bytes.Equal(r.body, patch) {
		t.Errorf("request %s %s (%s) %q", r.method, r.path, r.contentType, r.body)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("got %+v", p.Status)
	}
}

// Lists of all namespaces carry their selectors; deletes carry their
// options.
func TestListAndDelete(t *testing.T) {
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			s.write(w, http.StatusOK, nodekit.ContentTypeProtobuf, corev1.SchemeGroupVersion, &metav1.Status{Status: metav1.StatusSuccess})
			return
		}
		s.write(w, http.StatusOK, nodekit.ContentTypeProtobuf, corev1.SchemeGroupVersion,
			&corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}})
	})
	list, err := c.Pods("").List(ctx(t), metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.path != "/api/v1/pods" || r.query != "fieldSelector=spec.nodeName%3Dn1" {
		t.Errorf("list %s?%s", r.path, r.query)
	}
	if len(list.Items) != 2 || list.ResourceVersion != "9" {
		t.Errorf("list %+v", list)
	}
	uid := types.UID("u1")
	if err := c.Pods("ns").Delete(ctx(t), "a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Fatal(err)
	}
	r := s.last()
	var opts metav1.DeleteOptions
	s.decode(r.contentType, r.body, &opts)
	if r.method != http.MethodDelete || r.path != "/api/v1/namespaces/ns/pods/a" || *opts.GracePeriodSeconds != 0 || *opts.Preconditions.UID != uid {
		t.Errorf("delete %s %s %+v", r.method, r.path, opts)
	}
}

// Error answers are *apierrors.StatusError, whether protobuf or JSON.
func TestErrors(t *testing.T) {
	for _, mediaType := range []string{nodekit.ContentTypeProtobuf, nodekit.ContentTypeJSON} {
		_, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
			var st *apierrors.StatusError
			code := http.StatusNotFound
			if r.Method == http.MethodPut {
				code, st = http.StatusConflict, apierrors.NewConflict(coordinationv1.Resource("leases"), "n1", nil)
			} else {
				st = apierrors.NewNotFound(coordinationv1.Resource("leases"), "n1")
			}
			s.write(w, code, mediaType, metav1.SchemeGroupVersion, &st.ErrStatus)
		})
		leases := c.Leases("kube-node-lease")
		if _, err := leases.Get(ctx(t), "n1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: Get: %v, want not found", mediaType, err)
		}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		_, err := leases.Update(ctx(t), l, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			t.Errorf("%s: Update: %v, want conflict", mediaType, err)
		}
		if _, ok := err.(*apierrors.StatusError); !ok {
			t.Errorf("%s: error of type %T", mediaType, err)
		}
	}
}

// A watch decodes the protobuf event stream.
func TestWatchProtobuf(t *testing.T) {
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		info := s.info(nodekit.ContentTypeProtobuf)
		w.Header().Set("Content-Type", nodekit.ContentTypeProtobuf+";stream=watch")
		w.WriteHeader(http.StatusOK)
		enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(w), s.codecs.EncoderForVersion(info.StreamSerializer.Serializer, corev1.SchemeGroupVersion))
		objEnc := s.codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
		for i, et := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
			raw, err := runtime.Encode(objEnc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: string(rune('1' + i))}})
			if err != nil {
				t.Error(err)
			}
			if err := enc.Encode(&metav1.WatchEvent{Type: string(et), Object: runtime.RawExtension{Raw: raw}}); err != nil {
				t.Error(err)
			}
		}
	})
	w, err := c.Nodes().Watch(ctx(t), metav1.ListOptions{FieldSelector: "metadata.name=n1", ResourceVersion: "1", TimeoutSeconds: ptr.To[int64](300)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for e := range w.ResultChan() {
		n, ok := e.Object.(*corev1.Node)
		if !ok {
			t.Fatalf("event %s of %T", e.Type, e.Object)
		}
		got = append(got, string(e.Type)+" "+n.Name+" "+n.ResourceVersion)
	}
	if want := "ADDED n1 1,MODIFIED n1 2,DELETED n1 3"; strings.Join(got, ",") != want {
		t.Errorf("events %q, want %q", got, want)
	}
	r := s.last()
	if r.path != "/api/v1/nodes" || !strings.Contains(r.query, "watch=true") || !strings.Contains(r.query, "fieldSelector=metadata.name%3Dn1") || !strings.Contains(r.query, "timeoutSeconds=300") {
		t.Errorf("watch %s?%s", r.path, r.query)
	}
}

// Tokens are requested from serviceaccounts/<name>/token.
func TestCreateToken(t *testing.T) {
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		var tr authenticationv1.TokenRequest
		s.decode(r.Header.Get("Content-Type"), s.last().body, &tr)
		tr.Status.Token = "tok"
		s.write(w, http.StatusCreated, nodekit.ContentTypeProtobuf, authenticationv1.SchemeGroupVersion, &tr)
	})
	tr, err := c.ServiceAccounts("ns").CreateToken(ctx(t), "default", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"api"}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := s.last()
	if r.method != http.MethodPost || r.path != "/api/v1/namespaces/ns/serviceaccounts/default/token" || r.contentType != nodekit.ContentTypeProtobuf {
		t.Errorf("request %s %s (%s)", r.method, r.path, r.contentType)
	}
	if tr.Status.Token != "tok" || tr.Spec.Audiences[0] != "api" {
		t.Errorf("got %+v", tr)
	}
}

// Reviews are created at the cluster scope of their groups, in protobuf,
// and the answers decoded.
func TestReviews(t *testing.T) {
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			s.decode(r.Header.Get("Content-Type"), s.last().body, &tr)
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: tr.Spec.Token == "good", User: authenticationv1.UserInfo{Username: "alice"}}
			s.write(w, http.StatusCreated, nodekit.ContentTypeProtobuf, authenticationv1.SchemeGroupVersion, &tr)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			s.decode(r.Header.Get("Content-Type"), s.last().body, &sar)
			sar.Status.Allowed = sar.Spec.User == "alice" && sar.Spec.ResourceAttributes.Subresource == "stats"
			s.write(w, http.StatusCreated, nodekit.ContentTypeProtobuf, authorizationv1.SchemeGroupVersion, &sar)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	tr, err := c.TokenReviews().Create(ctx(t), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "good"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.method != http.MethodPost || r.contentType != nodekit.ContentTypeProtobuf {
		t.Errorf("token review request %s %s (%s)", r.method, r.path, r.contentType)
	}
	if !tr.Status.Authenticated || tr.Status.User.Username != "alice" {
		t.Errorf("token review %+v", tr.Status)
	}
	sar, err := c.SubjectAccessReviews().Create(ctx(t), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "stats", Name: "n1"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sar.Status.Allowed {
		t.Errorf("access review %+v", sar.Status)
	}
}

// The event sink writes each event in its namespace: create and update in
// protobuf, patch as a strategic-merge patch.
func TestEventSink(t *testing.T) {
	s, c := newServer(t, func(s *server, w http.ResponseWriter, r *http.Request) {
		s.write(w, http.StatusOK, nodekit.ContentTypeProtobuf, corev1.SchemeGroupVersion,
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "ns"}, Count: 2})
	})
	sink := c.EventSink()
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "ns"}, Reason: "Started"}
	if _, err := sink.Create(e); err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.method != http.MethodPost || r.path != "/api/v1/namespaces/ns/events" || r.contentType != nodekit.ContentTypeProtobuf {
		t.Errorf("create %s %s (%s)", r.method, r.path, r.contentType)
	}
	if _, err := sink.Update(e); err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.method != http.MethodPut || r.path != "/api/v1/namespaces/ns/events/e1" {
		t.Errorf("update %s %s", r.method, r.path)
	}
	got, err := sink.Patch(e, []byte(`{"count":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := s.last(); r.method != http.MethodPatch || r.path != "/api/v1/namespaces/ns/events/e1" || r.contentType != string(types.StrategicMergePatchType) {
		t.Errorf("patch %s %s (%s)", r.method, r.path, r.contentType)
	}
	if got.Count != 2 {
		t.Errorf("patched event %+v", got)
	}
}

// A JSON rest.Config gets JSON bodies and asks for JSON.
func TestJSONConfig(t *testing.T) {
	var got request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = request{method: r.Method, contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept"), body: body}
		w.Header().Set("Content-Type", nodekit.ContentTypeJSON)
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`))
	}))
	defer srv.Close()
	c, err := nodekit.NewClient(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: nodekit.ContentTypeJSON}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Nodes().Create(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "n1" || got.contentType != nodekit.ContentTypeJSON || got.accept != nodekit.ContentTypeJSON || !bytes.HasPrefix(got.body, []byte("{")) {
		t.Errorf("node %q; request %+v", n.Name, got)
	}
}
