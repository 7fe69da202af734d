package nodeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/nodestatus/usage"
	"github.com/nodekit/nodekit/podsync/nodeapi"
)

// decodeStrict decodes a Summary, refusing fields the type does not have.
func decodeStrict(t *testing.T, b []byte) *statsapi.Summary {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s statsapi.Summary
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decoding the summary as stats/v1alpha1 Summary: %v\n%s", err, b)
	}
	return &s
}

func TestSummary(t *testing.T) {
	f := newFixture(t, 2, 2)
	h := newHandler(t, nodeapi.Options{Stats: f.coll})
	w := get(h, "/stats/summary")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /stats/summary = %d %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	s := decodeStrict(t, w.Body.Bytes())
	if s.Node.NodeName != "node-1" || len(s.Pods) != 2 || len(s.Pods[0].Containers) != 2 {
		t.Fatalf("summary node %q, %d pods", s.Node.NodeName, len(s.Pods))
	}
	if s.Node.Fs == nil || s.Node.Runtime == nil || s.Pods[0].Containers[0].Rootfs == nil || s.Pods[0].EphemeralStorage == nil {
		t.Errorf("full summary lacks fs, runtime, rootfs or ephemeral storage: %s", w.Body)
	}
	// kubelet's JSON names, checked on the raw document.
	var raw map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &raw)
	node := raw["node"].(map[string]any)
	for _, k := range []string{"nodeName", "startTime", "cpu", "memory", "fs", "network", "rlimit", "runtime"} {
		if _, ok := node[k]; !ok {
			t.Errorf("node has no %q", k)
		}
	}
	pod := raw["pods"].([]any)[0].(map[string]any)
	for _, k := range []string{"podRef", "startTime", "containers", "cpu", "memory", "ephemeral-storage"} {
		if _, ok := pod[k]; !ok {
			t.Errorf("pod has no %q", k)
		}
	}
	ctr := pod["containers"].([]any)[0].(map[string]any)
	if cpu := ctr["cpu"].(map[string]any); cpu["usageCoreNanoSeconds"] == nil || cpu["time"] == nil {
		t.Errorf("container cpu %v, want usageCoreNanoSeconds and time", cpu)
	}

	// Only CPU and memory.
	w = get(h, "/stats/summary?only_cpu_and_memory=true")
	s = decodeStrict(t, w.Body.Bytes())
	if s.Node.CPU == nil || s.Node.Memory == nil || s.Node.Fs != nil || s.Node.Network != nil || s.Node.Rlimit != nil || s.Node.Runtime != nil {
		t.Errorf("only_cpu_and_memory node: %s", w.Body)
	}
	p := s.Pods[0]
	if p.CPU == nil || p.Memory == nil || p.EphemeralStorage != nil || p.Containers[0].Rootfs != nil || p.Containers[0].Logs != nil || p.Containers[0].CPU == nil {
		t.Errorf("only_cpu_and_memory pod: %+v", p)
	}
	// The collector's snapshot was not trimmed in place.
	if f.coll.Latest().Summary.Node.Fs == nil {
		t.Error("only_cpu_and_memory changed the shared snapshot")
	}

	for target, code := range map[string]int{
		"/stats/summary?only_cpu_and_memory=maybe": http.StatusBadRequest,
		"/stats/summary/":                          http.StatusOK,
		"/stats/other":                             http.StatusNotFound,
	} {
		if w := get(h, target); w.Code != code {
			t.Errorf("GET %s = %d, want %d", target, w.Code, code)
		}
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/stats/summary", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /stats/summary = %d, want 405", w.Code)
	}
}

type noStats struct{}

func (noStats) Latest() *usage.Snapshot { return nil }

func TestSummaryBeforeFirstSample(t *testing.T) {
	for name, h := range map[string]*nodeapi.Handler{
		"no provider":   newHandler(t, nodeapi.Options{}),
		"no sample yet": newHandler(t, nodeapi.Options{Stats: noStats{}}),
	} {
		if w := get(h, "/stats/summary"); w.Code != http.StatusServiceUnavailable {
			t.Errorf("%s: GET /stats/summary = %d, want 503", name, w.Code)
		}
	}
}

func TestPodsAndHealthz(t *testing.T) {
	pods := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"}}}
	healthy := true
	h := newHandler(t, nodeapi.Options{
		Pods: func(context.Context) []*corev1.Pod { return pods },
		Healthz: func(context.Context) error {
			if healthy {
				return nil
			}
			return errString("runtime is down")
		},
	})
	w := get(h, "/pods")
	var list corev1.PodList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Errorf("GET /pods = %d %s (%v)", w.Code, w.Body, err)
	}
	if w := get(h, "/healthz"); w.Code != http.StatusOK || w.Body.String() != "ok" {
		t.Errorf("GET /healthz = %d %q", w.Code, w.Body)
	}
	healthy = false
	if w := get(h, "/healthz"); w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "runtime is down") {
		t.Errorf("GET /healthz unhealthy = %d %q", w.Code, w.Body)
	}
	if w := get(newHandler(t, nodeapi.Options{}), "/pods"); !strings.Contains(w.Body.String(), `"items":[]`) {
		t.Errorf("GET /pods without pods = %s, want an empty list", w.Body)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
