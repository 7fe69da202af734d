package nodeapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	criv1 "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// Reading a container's log as kubectl logs --tail=1 --timestamps does.
func Example() {
	root, _ := os.MkdirTemp("", "nodeapi-example")
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "default_web_0b6c5a1e-1f0c-4d4e-9d7a-3f2b1c0d9e8f", "app")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "0.log"), []byte(
		"2026-03-01T12:00:00.000000001Z stdout F hello\n"+
			"2026-03-01T12:00:01.000000002Z stderr P wor\n"+
			"2026-03-01T12:00:01.000000003Z stderr F ld\n"), 0o644)

	h, err := nodeapi.New(nodeapi.Options{PodLogRoot: root})
	if err != nil {
		fmt.Println(err)
		return
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/containerLogs/default/web/app?tailLines=2&timestamps=true", nil))
	fmt.Print(w.Body.String())
	// Output: 2026-03-01T12:00:01.000000002Z world
}

// Which nodes subresources a request needs, as kubelet maps it.
func ExampleAttributes() {
	for _, p := range []string{"/stats/summary", "/metrics/resource", "/pods", "/containerLogs/ns/web/app"} {
		verb, subresources := nodeapi.Attributes("GET", p)
		fmt.Println(p, verb, subresources)
	}
	// Output:
	// /stats/summary get [stats]
	// /metrics/resource get [metrics]
	// /pods get [pods proxy]
	// /containerLogs/ns/web/app get [proxy]
}

// A handler behind Auth, the reviews answered by a fake clientset: a
// token the API server knows, allowed nodes/stats and nothing else. With
// a real clientset the same two clients come from
// cs.AuthenticationV1().TokenReviews() and
// cs.AuthorizationV1().SubjectAccessReviews(); nodeapi.NewServer serves
// the wrapped handler over TLS.
func ExampleAuth_Wrap() {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "metrics-server-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:metrics-server"}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.ResourceAttributes.Subresource == "stats"
		return true, sar, nil
	})
	auth, err := nodeapi.NewAuth(nodeapi.AuthOptions{
		NodeName:             "node-1",
		TokenReviews:         cs.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(),
	})
	if err != nil {
		panic(err)
	}
	h := auth.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := nodeapi.UserFrom(r.Context())
		fmt.Fprintf(w, "%s served to %s\n", r.URL.Path, u.Name)
	}))
	for _, tc := range []struct{ path, token string }{
		{"/stats/summary", ""},
		{"/stats/summary", "stolen"},
		{"/stats/summary", "metrics-server-token"},
		{"/containerLogs/kube-system/etcd/etcd", "metrics-server-token"},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body)
	}
	// Output:
	// 401 Unauthorized
	// 401 Unauthorized
	// 200 /stats/summary served to system:serviceaccount:kube-system:metrics-server
	// 403 Forbidden (user=system:serviceaccount:kube-system:metrics-server, verb=get, resource=nodes, subresource(s)=[proxy])
}

// Running a command in a container as kubelet's /run does, on the fake
// runtime; Options.Container finds the container (an agent uses
// PodStates.Container). /exec, /attach and /portForward are found the
// same way and proxied to the runtime's streaming server.
func ExampleHandler_run() {
	ctx := context.Background()
	rt := runtimetest.New(runtimetest.Options{})
	sbCfg := &criv1.PodSandboxConfig{Metadata: &criv1.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}}
	sb, _ := rt.RunPodSandbox(ctx, sbCfg, "")
	id, _ := rt.CreateContainer(ctx, sb, &criv1.ContainerConfig{
		Metadata: &criv1.ContainerMetadata{Name: "app"}, Image: &criv1.ImageSpec{Image: runtimetest.BusyboxImage}}, sbCfg)
	_ = rt.StartContainer(ctx, id)
	rt.ScriptExec(id, []string{"cat", "/etc/hostname"}, runtimetest.ExecScript{Stdout: "web\n"})

	h, err := nodeapi.New(nodeapi.Options{
		Runtime: rt,
		Container: func(_ context.Context, ns, pod, uid, container string) (string, bool) {
			return id, ns == "default" && pod == "web" && container == "app"
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range []string{"/run/default/web/app?cmd=cat+/etc/hostname", "/run/default/web/db?cmd=true"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", p, nil))
		fmt.Print(w.Code, " ", w.Body.String())
	}
	// Output:
	// 200 web
	// 404 container not found ("db")
}
