package nodeapi_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nodekit/nodekit/podsync/nodeapi"
)

func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics/resource: %v\n%s", err, body)
	}
	return fams
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestMetricsResource(t *testing.T) {
	f := newFixture(t, 2, 2)
	h := newHandler(t, nodeapi.Options{Stats: f.coll})
	w := get(h, "/metrics/resource")
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics/resource = %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	fams := parseMetrics(t, w.Body.String())
	ms := t0.UnixMilli()
	want := []struct {
		name   string
		typ    dto.MetricType
		n      int
		labels []string
		stamp  bool
	}{
		{"node_cpu_usage_seconds_total", dto.MetricType_COUNTER, 1, nil, true},
		{"node_memory_working_set_bytes", dto.MetricType_GAUGE, 1, nil, true},
		{"container_cpu_usage_seconds_total", dto.MetricType_COUNTER, 4, []string{"container", "namespace", "pod"}, true},
		{"container_memory_working_set_bytes", dto.MetricType_GAUGE, 4, []string{"container", "namespace", "pod"}, true},
		{"container_start_time_seconds", dto.MetricType_GAUGE, 4, []string{"container", "namespace", "pod"}, false},
		{"pod_cpu_usage_seconds_total", dto.MetricType_COUNTER, 2, []string{"namespace", "pod"}, true},
		{"pod_memory_working_set_bytes", dto.MetricType_GAUGE, 2, []string{"namespace", "pod"}, true},
		{"resource_scrape_error", dto.MetricType_GAUGE, 1, nil, false},
	}
	for _, wf := range want {
		fam := fams[wf.name]
		if fam == nil {
			t.Errorf("%s missing", wf.name)
			continue
		}
		if fam.GetType() != wf.typ || len(fam.Metric) != wf.n {
			t.Errorf("%s: type %v with %d series, want %v with %d", wf.name, fam.GetType(), len(fam.Metric), wf.typ, wf.n)
		}
		for _, m := range fam.Metric {
			l := labels(m)
			if len(l) != len(wf.labels) {
				t.Errorf("%s labels %v, want %v", wf.name, l, wf.labels)
			}
			for _, k := range wf.labels {
				if l[k] == "" {
					t.Errorf("%s has no %s label: %v", wf.name, k, l)
				}
			}
			if wf.stamp && m.GetTimestampMs() != ms {
				t.Errorf("%s timestamp %d, want the sample's %d", wf.name, m.GetTimestampMs(), ms)
			}
			if !wf.stamp && m.TimestampMs != nil {
				t.Errorf("%s has a timestamp, want none", wf.name)
			}
		}
	}
	// Values: node CPU in seconds, working set in bytes, pod-1's c1
	// container (1001 ms of CPU, 2 MiB working set), start time.
	if v := fams["node_cpu_usage_seconds_total"].Metric[0].GetCounter().GetValue(); v != 12 {
		t.Errorf("node cpu = %v s, want 12", v)
	}
	if v := fams["node_memory_working_set_bytes"].Metric[0].GetGauge().GetValue(); v != 1<<30 {
		t.Errorf("node working set = %v, want 1Gi", v)
	}
	found := false
	for _, m := range fams["container_cpu_usage_seconds_total"].Metric {
		if l := labels(m); l["pod"] == "pod-1" && l["container"] == "c1" && l["namespace"] == "ns" {
			found = true
			if v := m.GetCounter().GetValue(); v != 1.002 {
				t.Errorf("pod-1/c1 cpu = %v, want 1.002", v)
			}
		}
	}
	if !found {
		t.Error("no series for ns/pod-1/c1")
	}
	if v := fams["container_start_time_seconds"].Metric[0].GetGauge().GetValue(); v != float64(t0.Unix()) {
		t.Errorf("start time %v, want %d", v, t0.Unix())
	}
	if v := fams["resource_scrape_error"].Metric[0].GetGauge().GetValue(); v != 0 {
		t.Errorf("resource_scrape_error = %v, want 0", v)
	}

	// Without a sample: resource_scrape_error 1 and nothing else.
	fams = parseMetrics(t, get(newHandler(t, nodeapi.Options{}), "/metrics/resource").Body.String())
	if len(fams) != 1 || fams["resource_scrape_error"].Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("metrics without a sample: %v", fams)
	}
	// A container that exited leaves no series behind.
	f.clk.Step(10 * time.Second)
	list, _ := f.rt.ListContainers(t.Context(), nil)
	if err := f.rt.Exit(list[0].Id, 0); err != nil {
		t.Fatal(err)
	}
	_ = f.coll.SyncOnce(t.Context())
	fams = parseMetrics(t, get(h, "/metrics/resource").Body.String())
	if n := len(fams["container_cpu_usage_seconds_total"].Metric); n != 3 {
		t.Errorf("%d container series after one exited, want 3", n)
	}
}

func TestMetricsResourceHead(t *testing.T) {
	f := newFixture(t, 1, 1)
	h := newHandler(t, nodeapi.Options{Stats: f.coll})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodHead, "/metrics/resource", nil))
	if w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD /metrics/resource = %d, %d bytes, length %q", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/metrics/resource", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("PUT /metrics/resource = %d, want 405", w.Code)
	}
}

// /metrics serves Options.Metrics (the agent's own registry) for GET and
// HEAD only, and is not found without it.
func TestOwnMetrics(t *testing.T) {
	own := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("agent_up 1\n")) })
	h := newHandler(t, nodeapi.Options{Metrics: own})
	if w := get(h, "/metrics"); w.Code != http.StatusOK || w.Body.String() != "agent_up 1\n" {
		t.Errorf("GET /metrics = %d %q", w.Code, w.Body.String())
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/metrics", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics = %d, want 405", w.Code)
	}
	if w := get(newHandler(t, nodeapi.Options{}), "/metrics"); w.Code != http.StatusNotFound {
		t.Errorf("GET /metrics without Options.Metrics = %d, want 404", w.Code)
	}
}

// kubelet_http_requests_total counts the handler's requests by method,
// path (the first element, or metrics/<name>; "other" for the rest) and
// long-running, as kubelet counts its node API's.
func TestRequestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := nodeapi.New(nodeapi.Options{PodLogRoot: t.TempDir(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/metrics/resource"}, {"GET", "/metrics/resource"}, {"GET", "/healthz"},
		{"POST", "/exec/ns/pod/c?command=true"}, {"GET", "/nope/x"}, {"BREW", "/pods"},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(r.method, r.path, nil))
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "kubelet_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := labels(m)
			got[l["method"]+" "+l["path"]+" "+l["server_type"]+" "+l["long_running"]] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"GET metrics/resource readwrite false": 2,
		"GET healthz readwrite false":          1,
		"POST exec readwrite true":             1,
		"GET other readwrite false":            1,
		"other pods readwrite false":           1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("kubelet_http_requests_total %v; want %v", got, want)
	}
}
