package nodekit_test

import (
	"context"
	"fmt"
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
	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/podsynctest"
)

// On a real API server, three hollow nodes run 30 pods bound to them
// round-robin: each is Running and Ready with an IP of its node's range,
// read from one shared watch; deleted with the default grace period, each
// is stopped and gone from the API.
func TestIntegrationFleetPods(t *testing.T) {
	testFleetPods(t, "fleetpods-", 3, 30, 1)
}

// Three fleet processes' worth of shards share nine nodes and 45 pods on
// one API server: each node is run by exactly one shard, and every pod
// becomes Ready and goes away.
func TestIntegrationFleetPodsShards(t *testing.T) {
	testFleetPods(t, "fleetshard-", 9, 45, 3)
}

func testFleetPods(t *testing.T, prefix string, nodes, pods, shards int) {
	cp := controlplane.Need(t, cp)
	label := "app=" + strings.TrimSuffix(prefix, "-")
	admin := cp.AdminClient()
	t.Cleanup(func() {
		ctx := context.Background()
		_ = admin.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: label})
		for i := range nodes {
			_ = admin.CoreV1().Nodes().Delete(ctx, fmt.Sprint(prefix, i), metav1.DeleteOptions{})
			_ = admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, fmt.Sprint(prefix, i), metav1.DeleteOptions{})
		}
	})
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	owner := map[string]int{} // node -> shard
	var fleets []*fleet.Fleet
	for sh := range shards {
		fp, err := nodekit.NewFleetPods(nodekit.FleetPodsOptions{
			API:      client.API(),
			WriteQPS: 50, // the pods' writes share this budget
			Backend: func(n fleet.PodNode, podIP func(*corev1.Pod) string) podsync.BackendFunc {
				sim := podsynctest.New(podsynctest.Options{PodIP: podIP, Stages: func(*corev1.Pod, string) podsynctest.Stages {
					return podsynctest.Stages{StartDelay: 200 * time.Millisecond, StopExitCode: 137}
				}})
				return func(podsync.BackendParts) (podsync.Backend, error) { return podsync.Backend{Syncer: sim}, nil }
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		f, err := fleet.New(fleet.Options{Count: nodes, NamePrefix: prefix, Shard: fleet.Shard{Index: sh, Count: shards},
			Nodes: client.Nodes(), Leases: client.Leases(corev1.NamespaceNodeLease), Pods: fp.Node})
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.Len() {
			name := f.Node(i).Name()
			if prev, dup := owner[name]; dup {
				t.Fatalf("%s in shards %d and %d", name, prev, sh)
			}
			owner[name] = sh
		}
		fleets = append(fleets, f)
		wg.Add(2)
		go func() { defer wg.Done(); _ = fp.Run(runCtx) }()
		go func() { defer wg.Done(); _ = f.Run(runCtx) }()
	}
	if len(owner) != nodes {
		t.Fatalf("%d nodes in the shards, want %d", len(owner), nodes)
	}

	for i := range pods {
		p := boundPod(fmt.Sprint(prefix, "pod-", i), fmt.Sprint(prefix, i%nodes), "app")
		p.UID, p.Labels = "", map[string]string{"app": strings.TrimSuffix(prefix, "-")}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []corev1.Pod {
		l, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: label})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	testenv.Eventually(t, time.Minute, 50*time.Millisecond, "every pod Running and Ready", func() bool {
		items := list()
		for i := range items {
			if !podReady(&items[i]) {
				return false
			}
		}
		return len(items) == pods
	})
	for _, p := range list() {
		var want string
		fmt.Sscanf(p.Spec.NodeName, prefix+"%s", &want)
		if p.Status.HostIP != "10.0."+want+".1" || p.Status.PodIP == "" {
			t.Errorf("%s on %s: host IP %s, pod IP %s", p.Name, p.Spec.NodeName, p.Status.HostIP, p.Status.PodIP)
		}
	}
	if err := admin.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, 50*time.Millisecond, "every pod gone", func() bool { return len(list()) == 0 })
	for sh, f := range fleets {
		if s := f.Stats(); s.PodErrors != 0 || s.RegisterErrors != 0 {
			t.Errorf("shard %d: %d pod steps and %d registrations failed", sh, s.PodErrors, s.RegisterErrors)
		}
	}
}
