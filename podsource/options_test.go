package podsource

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Every out-of-bounds option is reported in nodekit's one wording
// (internal/optcheck.Range): "<pkg>: <Options>.<Field> <value> must be in [lo, hi]".
func TestOptionBoundsWording(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"file period", func() error {
			_, err := NewFile(FileOptions{Path: "/x", NodeName: "n", Period: 10})
			return err
		}, "podsource: FileOptions.Period 10ns must be in [1s, 24h0m0s]"},
		{"http timeout", func() error {
			_, err := NewHTTP(HTTPOptions{URL: "http://x/", NodeName: "n", Timeout: 1})
			return err
		}, "podsource: HTTPOptions.Timeout 1ns must be in [10ms, 5m0s]"},
		{"http period", func() error {
			_, err := NewHTTP(HTTPOptions{URL: "http://x/", NodeName: "n", Period: 48 * 3600e9})
			return err
		}, "podsource: HTTPOptions.Period 48h0m0s must be in [1s, 24h0m0s]"},
		{"mirror period", func() error {
			_, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(fake.NewClientset().CoreV1()), Nodes: fake.NewClientset().CoreV1().Nodes(), NodeName: "n", StaticPods: noPods, Period: 5})
			return err
		}, "podsource: MirrorPodsOptions.Period 5ns must be in [1s, 24h0m0s]"},
		{"merger buffer", func() error {
			_, err := NewMerger(MergerOptions{Sources: []PodSource{SourceFunc("a", nil)}, Buffer: ptr(-1)})
			return err
		}, "podsource: MergerOptions.Buffer -1 must be in [0, 100000]"},
	} {
		err := tc.err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A required option left out is reported in the same wording
// (internal/optcheck.Required): "<pkg>: <Options>.<Field> is required".
func TestOptionRequiredWording(t *testing.T) {
	client := fake.NewClientset()
	for _, tc := range []struct {
		err  func() error
		want string
	}{
		{func() error { _, err := NewFile(FileOptions{NodeName: "n"}); return err }, "podsource: FileOptions.Path is required"},
		{func() error { _, err := NewFile(FileOptions{Path: "/x", NodeName: " "}); return err }, "podsource: FileOptions.NodeName is required"},
		{func() error { _, err := NewHTTP(HTTPOptions{NodeName: "n"}); return err }, "podsource: HTTPOptions.URL is required"},
		{func() error { _, err := NewAPI(APIOptions{NodeName: "n"}); return err }, "podsource: APIOptions.Pods is required"},
		{func() error { _, err := NewMerger(MergerOptions{}); return err }, "podsource: MergerOptions.Sources is required"},
		{func() error {
			_, err := NewMirrorPods(MirrorPodsOptions{NodeName: "n", StaticPods: noPods})
			return err
		}, "podsource: MirrorPodsOptions.Pods is required"},
		{func() error {
			_, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(client.CoreV1()), NodeName: "n", StaticPods: noPods})
			return err
		}, "podsource: MirrorPodsOptions.Nodes is required unless NodeUID is set"},
	} {
		if err := tc.err(); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// A node name follows one rule everywhere, kubelet's for its hostname:
// trimmed and lower-cased, then a DNS-1123 subdomain.
func TestNodeNameOneRule(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "web.yaml"), webYAML)
	file, err := NewFile(FileOptions{Path: dir, NodeName: " Node-1 "})
	if err != nil {
		t.Fatalf("NewFile: %v", err)
	}
	if err := file.SyncOnce(ctx); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	pods := file.Pods()
	if len(pods) != 1 {
		t.Fatalf("Pods after SyncOnce: %v", pods)
	}
	decoded, err := DecodeManifest([]byte(webYAML), Origin{Source: FileSource, Location: filepath.Join(dir, "web.yaml"), NodeName: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	upper, err := DecodeManifest([]byte(webYAML), Origin{Source: FileSource, Location: filepath.Join(dir, "web.yaml"), NodeName: "NODE-1"})
	if err != nil {
		t.Fatal(err)
	}
	for what, p := range map[string]*v1.Pod{"file source": pods[0], "DecodeManifest": upper} {
		if p.Name != "web-node-1" || p.Spec.NodeName != "node-1" || p.UID != decoded.UID {
			t.Errorf("%s: name %q nodeName %q uid %q, want web-node-1, node-1, %q", what, p.Name, p.Spec.NodeName, p.UID, decoded.UID)
		}
	}
	if _, err := NewHTTP(HTTPOptions{URL: "http://x/", NodeName: "Node-1"}); err != nil {
		t.Errorf("NewHTTP: %v", err)
	}
	api, err := NewAPI(APIOptions{Pods: fake.NewClientset().CoreV1().Pods(metav1.NamespaceAll), NodeName: "Node-1"})
	if err != nil || api.nodeName != "node-1" {
		t.Errorf("NewAPI: node %q, %v", api.nodeName, err)
	}
	mirrors, err := NewMirrorPods(MirrorPodsOptions{Pods: podsOf(fake.NewClientset().CoreV1()), Nodes: fake.NewClientset().CoreV1().Nodes(), NodeName: "Node-1", StaticPods: noPods})
	if err != nil || mirrors.nodeName != "node-1" {
		t.Errorf("NewMirrorPods: node %q, %v", mirrors.nodeName, err)
	}

	if ref := MirrorPodFor(upper, "Node-1", "uid").OwnerReferences[0]; ref.Name != "node-1" {
		t.Errorf("MirrorPodFor: owner %q, want node-1", ref.Name)
	}

	// What stays invalid after lower-casing is refused by all of them.
	for _, bad := range []string{"", "  ", "N_1", "node.", strings.Repeat("a", 254)} {
		if _, err := NewFile(FileOptions{Path: dir, NodeName: bad}); err == nil || !strings.Contains(err.Error(), "FileOptions.NodeName") {
			t.Errorf("NewFile(%q): %v", bad, err)
		}
		if _, err := NewHTTP(HTTPOptions{URL: "http://x/", NodeName: bad}); err == nil || !strings.Contains(err.Error(), "HTTPOptions.NodeName") {
			t.Errorf("NewHTTP(%q): %v", bad, err)
		}
		_, err := DecodeManifest([]byte(webYAML), Origin{Source: FileSource, Location: "/m/web.yaml", NodeName: bad})
		if !errors.Is(err, ErrInvalidManifest) || !strings.Contains(err.Error(), "podsource: file /m/web.yaml: node name: ") {
			t.Errorf("DecodeManifest(node %q): %v", bad, err)
		}
	}
}
