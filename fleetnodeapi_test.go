package nodekit_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/fleet/fleetapi"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/podsynctest"
	"github.com/nodekit/nodekit/podsync/podsynctest/simapi"
)

// Every hollow node serves its node API at its own address on one
// listener: its summary, its containers' logs, and 404 for an address
// with no node; each node reports its address and port in its status.
func TestFleetNodeAPI(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	var api *fleetapi.Server
	h := newFleetPods(t, 2, func(o *nodekit.FleetPodsOptions, fo *fleet.Options, sims *sync.Map) {
		var err error
		api, err = fleetapi.New(fleetapi.Options{
			Port:  port,
			Clock: o.Clock,
			Auth:  nodeapi.AuthOptions{Anonymous: true, AlwaysAllow: true},
			Node: func(n fleet.PodNode, pods func(context.Context) []*corev1.Pod) (nodeapi.Options, error) {
				sim, _ := sims.Load(n.Name)
				node, err := simapi.New(simapi.Options{NodeName: n.Name, Backend: sim.(*podsynctest.Backend),
					Pods: pods, Clock: o.Clock})
				if err != nil {
					return nodeapi.Options{}, err
				}
				return nodeapi.Options{Stats: node, Logs: node.Logs}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		o.OnNode = func(n fleet.PodNode, half *nodekit.PodHalf) error { return api.Add(n, half.Pods) }
		fo.Setters = api.Setters
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- api.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	h.create(boundPod("web", "node-1", "app"))
	h.until("web Running", 10*time.Second, func() bool {
		p := h.get("web")
		return p != nil && p.Status.Phase == corev1.PodRunning
	})
	node, err := h.cs.CoreV1().Nodes().Get(h.ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := node.Status.Addresses; len(a) != 2 || a[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.64.0.2"}) ||
		a[1] != (corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"}) || node.Status.DaemonEndpoints.KubeletEndpoint.Port != int32(port) {
		t.Fatalf("node-1 reports %v, port %d", a, node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	get := func(addr, path string) (int, string) {
		t.Helper()
		resp, err := client.Get(fmt.Sprintf("https://%s:%d%s", addr, port, path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("127.64.0.2", "/stats/summary")
	var s statsapi.Summary
	if code != 200 || json.Unmarshal([]byte(body), &s) != nil || s.Node.NodeName != "node-1" || len(s.Pods) != 1 || s.Pods[0].PodRef.Name != "web" {
		t.Fatalf("node-1's summary: %d %s", code, body)
	}
	if code, body = get("127.64.0.1", "/stats/summary"); code != 200 || !strings.Contains(body, `"nodeName":"node-0"`) || strings.Contains(body, `"web"`) {
		t.Errorf("node-0's summary: %d %s", code, body)
	}
	if code, body = get("127.64.0.2", "/containerLogs/default/web/app"); code != 200 || !strings.Contains(body, "simulated container app of pod default/web started") {
		t.Errorf("node-1's logs: %d %q", code, body)
	}
	if code, body = get("127.64.0.1", "/containerLogs/default/web/app"); code != 404 {
		t.Errorf("web's logs from node-0: %d %q", code, body)
	}
	if code, body = get("127.64.0.3", "/healthz"); code != 404 || body != "no node at this address\n" {
		t.Errorf("an address with no node: %d %q", code, body)
	}
}
