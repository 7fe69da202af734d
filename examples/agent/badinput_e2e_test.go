package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/testenv"
)

// Log rotation in TestAgentBadInput: kubelet's default size and file
// count, looked at every 3s (kubelet: 10s).
const (
	badLogMaxSize  = 10 << 20
	badLogMaxFiles = 5
	badLogInterval = 3 * time.Second
	badLogBytes    = 1 << 30
)

// The agent is given bad input next to good: a static manifest that is not
// YAML beside a good one, a manifest URL that serves an HTML page, an API
// pod posted with a field the Pod type does not have, a pod with 10,000
// environment variables, and a container that writes 1 GiB of logs. The
// good pods run throughout and are never restarted; the broken manifest
// and the HTML page each get a Warning event on the Node naming the file
// or the URL; the unknown field is refused by name when the client asks
// for strict validation and dropped otherwise (the pod runs); the 10,000
// variables reach the container; the 1 GiB log is rotated (10 MiB, 5
// files) while it is written, so the log directory never holds more than
// the rotation allows plus what is written between two looks, and ends
// within the rotation's bound. Deleting everything leaves nothing in
// containerd and no log directory.
func TestAgentBadInput(t *testing.T) {
	cp := controlplane.Need(t, cp)
	onBothRuntimes(t, func(t *testing.T, c *containerdtest.Containerd, suffix string) { badInput(t, cp, c, suffix) })
}

func badInput(t *testing.T, cp *controlplane.ControlPlane, c *containerdtest.Containerd, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	enableNetwork(ctx, t, c)
	rt := criClient(t, c)
	admin := cp.AdminClient()
	node := "e2e-bad-input" + suffix

	manifests := t.TempDir()
	if err := os.WriteFile(filepath.Join(manifests, "good.yaml"), []byte(staticManifest("static-good"+suffix, c.BusyboxImage)), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(manifests, "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: [oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The manifest URL serves a sign-in page until fixed (then an empty
	// set): until then the agent keeps every mirror pod, as kubelet does
	// while a source has not answered.
	var fixed atomic.Bool
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fixed.Load() {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><p>Please sign in.</p></body></html>\n")
	}))
	defer html.Close()

	p := startAgent(t, node, append(podArgs(t, c, manifests),
		"--manifest-url="+html.URL+"/pods",
		"--http-check-frequency=1s",
		fmt.Sprintf("--container-log-max-size=%dMi", badLogMaxSize>>20),
		fmt.Sprintf("--container-log-max-files=%d", badLogMaxFiles),
		fmt.Sprintf("--container-log-monitor-interval=%v", badLogInterval),
	)...)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	// The unknown field: refused by name under strict validation;
	// dropped, with a warning, under the API server's default.
	body := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},
"spec":{"nodeName":%q,"hostNetwork":true,"dnsPolicy":"Default","terminationGracePeriodSeconds":30,
"containers":[{"name":"app","image":%q,"imagePullPolicy":"Never","command":["sh","-c",%q],"restartPolcy":"Always"}]}}`,
			name, node, c.BusyboxImage, sleeper))
	}
	err := admin.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").
		Param("fieldValidation", "Strict").Body(body("unknown-field-strict" + suffix)).Do(ctx).Error()
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.containers[0].restartPolcy"`) {
		t.Errorf("creating a pod with an unknown field under strict validation: %v; want an error naming spec.containers[0].restartPolcy", err)
	}
	if err := admin.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").
		Body(body("unknown-field" + suffix)).Do(ctx).Error(); err != nil {
		t.Fatalf("creating a pod with an unknown field under the default validation: %v", err)
	}

	// 10,000 environment variables; the container counts what it got.
	envs := make([]corev1.EnvVar, 10000)
	for i := range envs {
		envs[i] = corev1.EnvVar{Name: fmt.Sprintf("V%05d", i), Value: "v"}
	}
	manyEnv := faultPod(node, "many-env"+suffix, c.BusyboxImage)
	manyEnv.Spec.Containers[0].Env = envs
	manyEnv.Spec.Containers[0].Command = []string{"sh", "-c", "echo envs=$(env | grep -c '^V[0-9]'); " + sleeper}
	// 1 GiB of 1 KiB lines as fast as the container can; Ready once
	// written.
	logger := faultPod(node, "log-1gib"+suffix, c.BusyboxImage)
	line := strings.Repeat("x", 1023)
	logger.Spec.Containers[0].Command = []string{"sh", "-c", fmt.Sprintf(
		"yes %s | dd bs=1M count=%d iflag=fullblock 2>/dev/null; touch /tmp/written; %s", line, badLogBytes>>20, sleeper)}
	logger.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/written"}}},
		PeriodSeconds: 1,
	}
	good := faultPod(node, "api-good"+suffix, c.BusyboxImage)
	good.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1,
	}
	names := []string{"unknown-field" + suffix, "many-env" + suffix, "log-1gib" + suffix, "api-good" + suffix}
	for _, pod := range []*corev1.Pod{manyEnv, logger, good} {
		if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", pod.Name, err)
		}
	}
	t.Cleanup(func() {
		zero := int64(0)
		for _, name := range names {
			_ = admin.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})
	mirror := "static-good" + suffix + "-" + node
	goodPods := []string{mirror, "api-good" + suffix, "unknown-field" + suffix, "many-env" + suffix}
	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the good pods Running and Ready", func() bool {
		return runningReady(ctx, admin, node, goodPods)
	})
	before := apiContainers(ctx, t, admin, node)

	// The broken manifest and the HTML page: a Warning on the Node each,
	// naming the file and the URL.
	for _, want := range []string{broken, html.URL + "/pods"} {
		testenv.Eventually(t, time.Minute, 200*time.Millisecond, "an InvalidManifest event on the Node naming "+want, func() bool {
			return nodeEventSays(ctx, admin, node, "InvalidManifest", want)
		})
	}
	if ev := nodeEvent(ctx, admin, node, "InvalidManifest", html.URL); ev == nil || !strings.Contains(ev.Message, `it begins "<!DOCTYPE html>"`) {
		t.Errorf("event for the manifest URL: %v; want it to quote the page's beginning", ev)
	} else {
		t.Logf("event for the manifest URL: %s", ev.Message)
	}
	if ev := nodeEvent(ctx, admin, node, "InvalidManifest", broken); ev != nil {
		t.Logf("event for the broken manifest: %s", ev.Message)
	}

	// The 10,000 variables reached the container.
	manyUID := podUID(ctx, t, admin, "many-env"+suffix)
	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the many-env container reporting envs=10000", func() bool {
		data, _ := os.ReadFile(filepath.Join(c.PodLogRoot, "default_many-env"+suffix+"_"+manyUID, "app", "0.log"))
		return strings.Contains(string(data), "envs=10000\n")
	})

	// The 1 GiB log: sample the log directory's size while it is written.
	logUID := podUID(ctx, t, admin, "log-1gib"+suffix)
	logDir := filepath.Join(c.PodLogRoot, "default_log-1gib"+suffix+"_"+logUID, "app")
	var (
		mu    sync.Mutex
		peak  int64
		burst int64 // the most written to the log in one look's interval
	)
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		// What the container wrote so far, from 0.log's growth (a smaller
		// 0.log is a new one after a rotation), and when: the last
		// interval's samples, for the most written in one interval.
		type point struct {
			at  time.Time
			cum int64
		}
		var last, cum int64
		var window []point
		for {
			if _, n := logFiles(logDir); n > 0 {
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
			}
			if info, err := os.Stat(filepath.Join(logDir, "0.log")); err == nil {
				size := info.Size()
				if size >= last {
					cum += size - last
				} else {
					cum += size
				}
				last = size
				now := time.Now()
				window = append(window, point{now, cum})
				for len(window) > 1 && now.Sub(window[0].at) > badLogInterval {
					window = window[1:]
				}
				mu.Lock()
				burst = max(burst, cum-window[0].cum)
				mu.Unlock()
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	written := time.Now()
	testenv.Eventually(t, 3*time.Minute, 200*time.Millisecond, "the 1 GiB log written (the pod Ready)", func() bool {
		return runningReady(ctx, admin, node, []string{"log-1gib" + suffix})
	})
	took := time.Since(written)
	rate := float64(badLogBytes) / took.Seconds()
	// Bytes written between two looks: at the mean rate, or the most seen
	// in one interval, whichever is more (a loaded machine writes in
	// bursts, and the mean counts the container's start).
	mu.Lock()
	interval := max(rate*badLogInterval.Seconds(), float64(burst))
	mu.Unlock()
	// Once written, the next look rotates what is left: at most MaxFiles
	// files, each at most MaxSize but the newest rotated one, which holds
	// what was written between the last two looks (as under kubelet).
	var files []string
	var total int64
	for deadline := time.Now().Add(4 * badLogInterval); ; {
		files, total = logFiles(logDir)
		if len(files) <= badLogMaxFiles && float64(total) <= badLogMaxFiles*badLogMaxSize+1.5*interval {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log directory %v after the 1 GiB was written: %d bytes in %v; want at most %d files, %d bytes",
				4*badLogInterval, total, files, badLogMaxFiles, int64(badLogMaxFiles*badLogMaxSize+1.5*interval))
		}
		pause(ctx)
	}
	close(stopSampling)
	<-sampleDone
	mu.Lock()
	t.Logf("1 GiB written in %v (%.0f MiB/s, at most %.1f MiB in %v); log directory at most %.1f MiB while written, %.1f MiB in %d files after: %v",
		took.Round(time.Millisecond), rate/(1<<20), float64(burst)/(1<<20), badLogInterval, float64(peak)/(1<<20), float64(total)/(1<<20), len(files), files)
	// While written: the rotation's files, and three that may each hold
	// what is written between two looks (the log being written, the
	// newest rotated one, and one being compressed), a look being late
	// by the compression: 1.5 intervals each.
	if bound := int64(badLogMaxFiles*badLogMaxSize + 3*1.5*interval); peak > bound || peak >= badLogBytes {
		t.Errorf("the log directory held %d bytes while written; want at most %d (the rotation's %d and 4.5 intervals of writing), and less than the 1 GiB written",
			peak, bound, badLogMaxFiles*badLogMaxSize)
	}
	mu.Unlock()
	gz := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".gz") {
			gz++
		}
	}
	if gz == 0 {
		t.Errorf("no rotated log was compressed: %v", files)
	}

	// The good pods ran throughout.
	if after := apiContainers(ctx, t, admin, node); !sameFor(before, after, goodPods) {
		t.Errorf("the good pods' containers changed:\nbefore %v\nafter  %v", before, after)
	}
	for _, name := range goodPods {
		if !runningContainer(rt, name) {
			t.Errorf("pod %s has no running container", name)
		}
	}

	fixed.Store(true)
	if err := os.Remove(filepath.Join(manifests, "good.yaml")); err != nil {
		t.Fatal(err)
	}
	deleteAndDrain(ctx, t, admin, rt, c, node, names)
	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the pods' log directories removed", func() bool {
		_, err1 := os.Stat(filepath.Dir(logDir))
		_, err2 := os.Stat(filepath.Join(c.PodLogRoot, "default_many-env"+suffix+"_"+manyUID))
		return os.IsNotExist(err1) && os.IsNotExist(err2)
	})
	p.stop(t)
}

// nodeEvent returns an event with reason on the Node whose message holds
// want, or nil.
func nodeEvent(ctx context.Context, admin kubernetes.Interface, node, reason, want string) *corev1.Event {
	evs, err := admin.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason})
	if err != nil {
		return nil
	}
	for i := range evs.Items {
		if evs.Items[i].Type == corev1.EventTypeWarning && strings.Contains(evs.Items[i].Message, want) {
			return &evs.Items[i]
		}
	}
	return nil
}

func nodeEventSays(ctx context.Context, admin kubernetes.Interface, node, reason, want string) bool {
	return nodeEvent(ctx, admin, node, reason, want) != nil
}

// podUID returns the UID of the pod named name in default.
func podUID(ctx context.Context, t *testing.T, admin kubernetes.Interface, name string) string {
	t.Helper()
	pod, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(pod.UID)
}

// logFiles lists dir's regular files and their total size.
func logFiles(dir string) ([]string, int64) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0
	}
	var names []string
	var total int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		names = append(names, e.Name())
		total += info.Size()
	}
	return names, total
}

// sameFor reports whether a and b agree on every name in names.
func sameFor(a, b map[string]string, names []string) bool {
	for _, n := range names {
		if a[n] == "" || a[n] != b[n] {
			return false
		}
	}
	return true
}
