package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/testenv"
)

// fakeManifest is staticManifest with an image the fake runtime pulls.
func fakeManifest(name string) string {
	return strings.Replace(staticManifest(name, "busybox"), "imagePullPolicy: Never", "imagePullPolicy: IfNotPresent", 1)
}

// Standalone on the fake runtime: a static pod from the manifest directory
// and one from the manifest URL (sent with its header) run, and the file's
// pod goes when the file does. No API server is needed.
func TestAgentStandalonePodsOnFakeRuntime(t *testing.T) {
	manifests := t.TempDir()
	manifest := filepath.Join(manifests, "web.yaml")
	if err := os.WriteFile(manifest, []byte(fakeManifest("web")), 0o644); err != nil {
		t.Fatal(err)
	}
	var sawHeader atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawHeader.Store(r.Header.Get("X-Token") == "abc")
		_, _ = io.WriteString(w, fakeManifest("fromurl"))
	}))
	defer srv.Close()

	cfg, err := parseFlags([]string{"--hostname-override=n1", "--listen=", "--port=0", "--pod-manifest-path=" + manifests,
		"--file-check-frequency=1s", "--manifest-url=" + srv.URL, "--manifest-url-header=X-Token:abc",
		"--root-dir=" + t.TempDir(), "--pod-log-root=" + t.TempDir(), "--resolv-conf=", "--node-ip=192.0.2.7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAgent(cfg, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	if a.client != nil || a.node != nil || a.pods == nil || a.pods.MirrorPods() != nil {
		t.Fatalf("standalone agent: client %v, heartbeat %v, pods %v", a.client, a.node, a.pods)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	rt := a.runtime
	running := func(pod string) bool {
		cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": pod},
		})
		return err == nil && len(cs) == 1
	}
	testenv.Eventually(t, 20*time.Second, 20*time.Millisecond, "both static pods running on the fake runtime", func() bool {
		return running("web-n1") && running("fromurl-n1")
	})
	if !sawHeader.Load() {
		t.Errorf("the manifest URL was not fetched with --manifest-url-header")
	}
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, 20*time.Millisecond, "the file's pod removed, the URL's kept", func() bool {
		sbs, err := rt.ListPodSandbox(ctx, nil)
		return err == nil && len(sbs) == 1 && sbs[0].Metadata.Name == "fromurl-n1" && running("fromurl-n1")
	})
}
