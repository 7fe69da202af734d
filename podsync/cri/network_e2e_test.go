package cri

import (
	"context"
	"errors"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/podsource"
)

// bridgeNetwork gives the test's containerd a bridge CNI network
// (containerdtest's EnableBridge) until the test ends, and returns its
// subnet.
func bridgeNetwork(t *testing.T, c *containerdtest.Containerd) *net.IPNet {
	t.Helper()
	b, err := c.EnableBridge(context.Background())
	if errors.Is(err, containerdtest.ErrNoCNIPlugins) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Remove(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return b.Subnet
}

// A pod on the pod network gets its own address from the bridge network;
// the generated status shows the sandbox's IP.
func TestE2EPodNetworkBridge(t *testing.T) {
	containerdtest.OnBoth(t, ctrd, ctrd2, testE2EPodNetworkBridge)
}

func testE2EPodNetworkBridge(t *testing.T, c *containerdtest.Containerd) {
	subnet := bridgeNetwork(t, c)
	e := e2eSetup(t, c)
	pod := e2ePod(c, "netpod", corev1.RestartPolicyAlways, "sh", "-c", sleeper)
	pod.Spec.HostNetwork = false
	e.eng.HandleUpdate(podsource.Update{Op: podsource.OpAdd, Pods: []*corev1.Pod{pod}})
	s := e.waitStatus(pod, "Running and Ready", func(s corev1.PodStatus) bool {
		return s.Phase == corev1.PodRunning && cond(s, corev1.PodReady) == "True/"
	})
	t.Logf("podIP %s on %v", s.PodIP, subnet)
	ip := net.ParseIP(s.PodIP)
	if ip == nil || !subnet.Contains(ip) || len(s.PodIPs) != 1 || s.PodIPs[0].IP != s.PodIP {
		t.Errorf("podIP %q, podIPs %v: want one address in %v", s.PodIP, s.PodIPs, subnet)
	}
	ctx := context.Background()
	sbs, err := e.rt.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes %v, %v", sbs, err)
	}
	st, err := e.rt.PodSandboxStatus(ctx, sbs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.GetStatus().GetNetwork().GetIp(); got != s.PodIP {
		t.Errorf("sandbox IP %q, status podIP %q", got, s.PodIP)
	}
	e.remove(pod)
}
