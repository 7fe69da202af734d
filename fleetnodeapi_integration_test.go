package nodekit_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/fleet/fleetapi"
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/podsynctest"
	"github.com/nodekit/nodekit/podsync/podsynctest/simapi"
)

// On a real API server, the real metrics-server scrapes three hollow
// nodes, each at its own address on one listener, and kubectl top shows
// their simulated usage; kubectl logs reaches a hollow node through the
// API server. The nodes authenticate metrics-server's token and the API
// server's client certificate as kubelet does and authorize each request
// against the node it came to.
func TestIntegrationFleetNodeAPI(t *testing.T) {
	cp := controlplane.Need(t, cp)
	const prefix, nodes = "hollowapi-", 3
	admin := cp.AdminClient()
	t.Cleanup(func() {
		ctx := context.Background()
		_ = admin.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: "app=hollowapi"})
		for i := range nodes {
			_ = admin.CoreV1().Nodes().Delete(ctx, fmt.Sprint(prefix, i), metav1.DeleteOptions{})
			_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, fmt.Sprint(prefix, i), metav1.DeleteOptions{})
		}
	})
	controlplane.NeedMetricsServer(t, cp, controlplane.MetricsServerOptions{})
	cfg := cp.AdminConfig()
	cfg.QPS, cfg.Burst = 100, 200
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leakcheck.CheckSettling(t, func() { utilnet.CloseIdleConnectionsFor(hc.Transport) }))
	client, err := nodekit.NewClientForHTTPClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := podsynctest.ParseRules(strings.NewReader(`
rules:
- selector: {containers: [app]}
  cpu: 200m
  memory: 50Mi
`))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var sims sync.Map
	api, err := fleetapi.New(fleetapi.Options{
		Port: ln.Addr().(*net.TCPAddr).Port,
		Auth: nodeapi.AuthOptions{ClientCAFile: cp.ClientCAFile(),
			TokenReviews:         admin.AuthenticationV1().TokenReviews(),
			SubjectAccessReviews: admin.AuthorizationV1().SubjectAccessReviews()},
		Node: func(n fleet.PodNode, pods func(context.Context) []*corev1.Pod) (nodeapi.Options, error) {
			sim, _ := sims.Load(n.Name)
			node, err := simapi.New(simapi.Options{NodeName: n.Name, Backend: sim.(*podsynctest.Backend),
				Pods: pods, Usage: rules.Usage, CPUTime: rules.CPUTime})
			if err != nil {
				return nodeapi.Options{}, err
			}
			return nodeapi.Options{Stats: node, Logs: node.Logs}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := nodekit.NewFleetPods(nodekit.FleetPodsOptions{
		API: client.API(),
		Backend: func(n fleet.PodNode, podIP func(*corev1.Pod) string) podsync.BackendFunc {
			sim := podsynctest.New(podsynctest.Options{PodIP: podIP, Stages: rules.Stages})
			sims.Store(n.Name, sim)
			return func(podsync.BackendParts) (podsync.Backend, error) { return podsync.Backend{Syncer: sim}, nil }
		},
		OnNode: func(n fleet.PodNode, half *nodekit.PodHalf) error { return api.Add(n, half.Pods) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.New(fleet.Options{Count: nodes, NamePrefix: prefix, Nodes: client.Nodes(),
		Leases: client.Leases(corev1.NamespaceNodeLease), Pods: fp.Node, Setters: api.Setters})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Add(3)
	go func() { defer wg.Done(); _ = fp.Run(runCtx) }()
	go func() { defer wg.Done(); _ = f.Run(runCtx) }()
	go func() {
		defer wg.Done()
		if err := api.Serve(runCtx, ln); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	for i := range nodes {
		p := boundPod(fmt.Sprint("hollowapi-pod-", i), fmt.Sprint(prefix, i), "app")
		p.UID, p.Labels = "", map[string]string{"app": "hollowapi"}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.AdminConfig(), kc); err != nil {
		t.Fatal(err)
	}
	bins, err := controlplane.BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) (string, error) {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		out, err := exec.CommandContext(cctx, filepath.Join(bins, "kubectl"), append([]string{"--kubeconfig=" + kc}, args...)...).CombinedOutput()
		return string(out), err
	}
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the pods Running", func() bool {
		l, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=hollowapi"})
		if err != nil || len(l.Items) != nodes {
			return false
		}
		for _, p := range l.Items {
			if p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		return true
	})
	out, err := kubectl("logs", "--namespace=default", "hollowapi-pod-1")
	if err != nil || !strings.Contains(out, "simulated container app of pod default/hollowapi-pod-1 started (restart 0) on node hollowapi-1") {
		t.Errorf("kubectl logs: %v: %s", err, out)
	}
	// kubectl top node: each node's 50m and 64Mi, plus its pod's 200m and
	// 50Mi (114Mi in all). CPU is a rate metrics-server takes between two
	// scrapes' counters and times, so it may be a millicore off.
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("kubectl's last answer: %s", last)
		}
	}()
	testenv.Eventually(t, 2*time.Minute, time.Second, "kubectl top node shows every hollow node", func() bool {
		out, err := kubectl("top", "node", "--no-headers")
		if now := fmt.Sprint(err, ": ", out); now != last {
			t.Logf("kubectl top node: %s", now)
			last = now
		}
		found := 0
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 5 && strings.HasPrefix(f[0], prefix) && nearMilli(f[1], 250) && f[3] == "114Mi" {
				found++
			}
		}
		return err == nil && found == nodes
	})
	t.Logf("kubectl top node: %s", last)
	testenv.Eventually(t, time.Minute, time.Second, "kubectl top pod shows the pods", func() bool {
		out, err := kubectl("top", "pod", "--namespace=default", "-l", "app=hollowapi", "--no-headers")
		last = fmt.Sprint(err, ": ", out)
		found := 0
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && nearMilli(f[1], 200) && f[2] == "50Mi" {
				found++
			}
		}
		return err == nil && found == nodes
	})
	t.Logf("kubectl top pod: %s", last)
	if s := f.Stats(); s.PodErrors != 0 || s.RegisterErrors != 0 || s.StatusErrors != 0 {
		t.Errorf("%d pod steps, %d registrations and %d status rounds failed", s.PodErrors, s.RegisterErrors, s.StatusErrors)
	}
}

// nearMilli reports whether a kubectl CPU figure ("250m") is want
// millicores, give or take one.
func nearMilli(s string, want int) bool {
	var m int
	if _, err := fmt.Sscanf(s, "%dm", &m); err != nil {
		return false
	}
	return m >= want-1 && m <= want+1
}
