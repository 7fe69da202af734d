package nodekit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodekit/nodekit/internal/apipath"
)

func TestAPIResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/nodes":                         "nodes",
		"/api/v1/nodes/n1":                      "nodes",
		"/api/v1/nodes/n1/status":               "nodes/status",
		"/api/v1/namespaces/default/pods":       "pods",
		"/api/v1/namespaces/default/pods/p/log": "pods/log",
		"/api/v1/namespaces/default":            "namespaces",
		"/api/v1/namespaces/default/status":     "namespaces/status",
		"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1": "leases",
		"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases":    "leases",
		"/version": "other",
		"/api":     "other",
		"/api/v1":  "other",
	} {
		if got := apipath.Resource(path); got != want {
			t.Errorf("Resource(%q) = %q; want %q", path, got, want)
		}
	}
}

func TestCountingTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("0123456789"))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	c, err := newAPICounter(reg)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: c.wrap(http.DefaultTransport)}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n", strings.NewReader("hello"))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := testutil.ToFloat64(c.requests.WithLabelValues("PUT", "leases", "200")); got != 2 {
		t.Errorf("requests = %v; want 2", got)
	}
	if got := testutil.ToFloat64(c.requestBytes.WithLabelValues("PUT", "leases")); got != 10 {
		t.Errorf("request bytes = %v; want 10", got)
	}
	if got := testutil.ToFloat64(c.responseBytes.WithLabelValues("PUT", "leases")); got != 20 {
		t.Errorf("response bytes = %v; want 20", got)
	}
	// A request that gets no response is counted with code 0.
	srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/nodes/n", nil)
	if _, err := hc.Do(req); err == nil {
		t.Fatal("request to a closed server succeeded")
	}
	if got := testutil.ToFloat64(c.requests.WithLabelValues("GET", "nodes", "0")); got != 1 {
		t.Errorf("failed requests = %v; want 1", got)
	}
}
