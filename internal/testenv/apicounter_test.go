package testenv

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestAPICounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "0123456789")
	}))
	defer srv.Close()
	var c APICounter
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	defer client.CloseIdleConnections()
	do := func(method, path, body string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	do("GET", "/api/v1/namespaces/default/secrets", "")
	before := c.Count()
	do("GET", "/api/v1/namespaces/default/configmaps?watch=true", "")
	do("PATCH", "/api/v1/namespaces/default/pods/web/status", `{"a":1}`)
	do("POST", "/api/v1/namespaces/default/serviceaccounts/app/token", "{}")
	do("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", "{}")
	do("GET", "/healthz", "")

	d := c.Count().Sub(before)
	if d.APICalls != (APICalls{Requests: 5, RequestBytes: 11, ResponseBytes: 50}) {
		t.Errorf("totals %+v", d.APICalls)
	}
	want := map[string]int{"WATCH configmaps": 1, "PATCH pods/status": 1, "POST serviceaccounts/token": 1, "PUT leases": 1, "GET other": 1}
	if got := d.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if v := d.Verbs(); v["PATCH"] != (APICalls{1, 7, 10}) || v["GET"].Requests != 1 {
		t.Errorf("verbs %v", v)
	}
	if len(d.Log) != 5 || d.Log[1] != "PATCH /api/v1/namespaces/default/pods/web/status" {
		t.Errorf("log %q", d.Log)
	}
	if all := c.Take(); all.Requests != 6 || len(all.Log) != 6 {
		t.Errorf("Take %+v, want 6 requests", all.APICalls)
	}
	if again := c.Count(); again.Requests != 0 || len(again.ByCall) != 0 || len(again.Log) != 0 {
		t.Errorf("after Take %+v", again)
	}
}
