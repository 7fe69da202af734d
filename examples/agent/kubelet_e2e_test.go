package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/remote"
)

// livenessCommand keeps /tmp/healthy while it runs: the liveness probe
// cats it, so removing it fails the probe and restarts the container.
const livenessCommand = `touch /tmp/healthy; trap 'exit 0' TERM; sleep 3600 & wait`

// runningContainers returns the IDs of the running containers of the pods
// named names, sorted.
func runningContainers(t *testing.T, rt *remote.Client, names ...string) []string {
	t.Helper()
	cs, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		if slices.Contains(names, c.Labels["io.kubernetes.pod.name"]) {
			ids = append(ids, c.Id)
		}
	}
	slices.Sort(ids)
	return ids
}

// The agent with its three sources (a manifest directory, a manifest URL
// served by the test with a header it checks, the API server) on
// containerd: one pod from each Running and Ready, mirror pods for the two
// static ones; an exec liveness probe that starts failing restarts its
// container; SIGTERM leaves the pods running and a restarted agent adopts
// them (the same containers); removing the three (file deleted, URL
// emptied, API pod deleted) leaves nothing in containerd.
func TestAgentThreeSourcesOnContainerd(t *testing.T) {
	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	const node = "e2e-three"

	manifests := t.TempDir()
	manifest := filepath.Join(manifests, "file.yaml")
	if err := os.WriteFile(manifest, []byte(staticManifest("file-web", c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	var urlBody atomic.Pointer[[]byte]
	body := []byte(staticManifest("url-web", c.BusyboxImage))
	urlBody.Store(&body)
	var badHeader atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Node-Token") != "s3cret" {
			badHeader.Add(1)
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		_, _ = w.Write(*urlBody.Load())
	}))
	defer srv.Close()
	// The URL and its header come from a KubeletConfiguration file.
	config := writeConfig(t, configHeader+fmt.Sprintf("staticPodURL: %s\nstaticPodURLHeader: {X-Node-Token: [s3cret]}\nhttpCheckFrequency: 1s\n", srv.URL))
	args := append(podArgs(t, c, manifests), "--config="+config)
	p := startAgent(t, node, args...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	grace := int64(30)
	apiPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api-live", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "app", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", livenessCommand},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
					PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 5,
				}}}},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, apiPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = admin.CoreV1().Pods("default").Delete(context.Background(), apiPod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})

	names := []string{"file-web-" + node, "url-web-" + node, apiPod.Name}
	allReady := func() bool {
		for _, n := range names {
			got, err := admin.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if err != nil || got.Status.Phase != corev1.PodRunning || !podReady(got) {
				return false
			}
			if n != apiPod.Name && got.Annotations[corev1.MirrorPodAnnotationKey] == "" {
				t.Fatalf("%s is not a mirror pod: %v", n, got.Annotations)
			}
		}
		return true
	}
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the three pods Running and Ready in the API", allReady)
	t.Logf("three pods Running and Ready %v after the agent started", time.Since(p.started).Round(time.Millisecond))
	if badHeader.Load() != 0 {
		t.Errorf("%d manifest URL requests without the configured header", badHeader.Load())
	}

	// Liveness: remove the file the probe reads; the container restarts.
	ids := runningContainers(t, rt, apiPod.Name)
	if len(ids) != 1 {
		t.Fatalf("%d running containers of %s", len(ids), apiPod.Name)
	}
	if _, err := rt.ExecSync(ctx, ids[0], []string{"rm", "/tmp/healthy"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "restartCount of the API pod's container grows after its liveness probe fails", func() bool {
		got, err := admin.CoreV1().Pods("default").Get(ctx, apiPod.Name, metav1.GetOptions{})
		return err == nil && len(got.Status.ContainerStatuses) == 1 && got.Status.ContainerStatuses[0].RestartCount >= 1 &&
			got.Status.ContainerStatuses[0].State.Running != nil && podReady(got)
	})
	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "an Unhealthy event for the failed liveness probe", func() bool {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + apiPod.Name + ",reason=Unhealthy"})
		return err == nil && len(evs.Items) > 0
	})

	// SIGTERM leaves the pods running; a new agent adopts the same containers.
	before := runningContainers(t, rt, names...)
	if len(before) != 3 {
		t.Fatalf("%d running containers before the restart, want 3", len(before))
	}
	p.stop(t)
	if after := runningContainers(t, rt, names...); !slices.Equal(after, before) {
		t.Fatalf("containers after SIGTERM %v, want %v still running", after, before)
	}
	p = startAgent(t, node, args...)
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the restarted agent reports the three pods Ready", allReady)
	// The pods were Ready before the restart, so wait for the new agent's
	// own first sync of each (its kubelet_pod_worker_duration_seconds
	// counts a pod's first SyncPod as "create"): a container it did not
	// adopt would have been killed or recreated by then.
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the restarted agent synced the three pods", func() bool {
		m, err := p.fetch("/metrics") // refused until the agent listens
		return err == nil && metricValue(m, `kubelet_pod_worker_duration_seconds_count{operation_type="create"}`) >= 3 &&
			metricValue(m, "kubelet_running_pods") == 3
	})
	if got := runningContainers(t, rt, names...); !slices.Equal(got, before) {
		all, _ := rt.ListContainers(ctx, nil)
		for _, c := range all {
			t.Logf("container %s %s %s attempt %d", c.Id[:12], c.Labels["io.kubernetes.pod.name"], c.State, c.Metadata.Attempt)
		}
		evs, _ := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			t.Logf("event %s %s %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
		t.Fatalf("containers after the restart %v, want the adopted %v", got, before)
	}

	// Removing the three: the file, the URL's content, the API pod.
	removed := time.Now()
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	empty := []byte{}
	urlBody.Store(&empty)
	if err := admin.CoreV1().Pods("default").Delete(ctx, apiPod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "containerd empty after the three were removed", func() bool {
		return runtimeEmpty(rt)
	})
	t.Logf("containerd empty %v after removal", time.Since(removed).Round(time.Millisecond))
	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the API pod and the mirror pods gone from the API", func() bool {
		for _, n := range names {
			if _, err := admin.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	testenv.Eventually(t, 10*time.Second, 100*time.Millisecond, "no mount of containerd's left", func() bool {
		return len(c.Mounts()) == 0
	})
	p.stop(t)
}

// A bad --config is refused at start with the file and the field; pods the
// node cannot take are rejected with kubelet's reason and message: beyond
// --max-pods (OutOfpods) and for another zone (NodeAffinity, an API pod and
// a static pod, whose mirror pod shows it); they never run, are Failed in
// the API with a Warning event, and deleting them (or the manifest)
// removes them.
func TestAgentRejectsOnContainerd(t *testing.T) {
	bin := buildAgent(t)
	bad := writeConfig(t, configHeader+"maxPods: 3\nregistryPullQPS: 5\n")
	cmd := exec.Command(bin, "--config="+bad)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	want := fmt.Sprintf("agent: --config %s: field \"registryPullQPS\" is not supported by this agent", bad)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("agent with a bad config: %v, stderr %q; want exit 2 and %q", err, stderr.String(), want)
	}

	cp := controlplane.Need(t, cp)
	c := containerdtest.Need(t, ctrd)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt := criClient(t, c)
	admin := cp.AdminClient()
	const node = "e2e-admit"
	// A static pod for another zone: static pods are admitted too.
	manifests := t.TempDir()
	staticSouth := filepath.Join(manifests, "south.yaml")
	manifest := strings.Replace(staticManifest("static-south", c.BusyboxImage), "spec:\n", "spec:\n  nodeSelector: {zone: south}\n", 1)
	if err := os.WriteFile(staticSouth, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, node, append(podArgs(t, c, manifests), "--max-pods=2", "--node-labels=zone=north")...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	grace := int64(30)
	mkPod := func(name string, selector map[string]string) *corev1.Pod {
		pod, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, NodeSelector: selector, HostNetwork: true, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "app", Image: c.BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sh", "-c", sleeper}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		return pod
	}
	running := func(name string) func() bool {
		return func() bool {
			got, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && got.Status.Phase == corev1.PodRunning && podReady(got)
		}
	}
	rejected := func(name, reason, message string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, 200*time.Millisecond, name+" Failed with "+reason, func() bool {
			got, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && got.Status.Phase == corev1.PodFailed && got.Status.Reason == reason && got.Status.Message == "Pod was rejected: "+message
		})
		testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "a Warning "+reason+" event for "+name, func() bool {
			evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
			return err == nil && len(evs.Items) > 0 && evs.Items[0].Type == corev1.EventTypeWarning && evs.Items[0].Message == message
		})
		if ids := runningContainers(t, rt, name); len(ids) != 0 {
			t.Fatalf("rejected pod %s runs %v", name, ids)
		}
	}

	// Its mirror pod carries the rejection.
	rejected("static-south-"+node, "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
	mkPod("first", nil)
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "first Running and Ready", running("first"))
	mkPod("south", map[string]string{"zone": "south"})
	rejected("south", "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
	mkPod("second", map[string]string{"zone": "north"})
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "second Running and Ready", running("second"))
	mkPod("third", nil)
	rejected("third", "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")

	for _, name := range []string{"first", "south", "second", "third"} {
		if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(staticSouth); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 200*time.Millisecond, "the five pods gone from the API and containerd empty", func() bool {
		list, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		return err == nil && len(list.Items) == 0 && runtimeEmpty(rt)
	})
	testenv.Eventually(t, 10*time.Second, 100*time.Millisecond, "no mount of containerd's left", func() bool {
		return len(c.Mounts()) == 0
	})
	p.stop(t)
}
