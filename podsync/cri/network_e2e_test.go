package cri

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/containerdtest"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/podsource"
)

// bridgeNetwork gives the test's containerd a bridge CNI network (the
// plugins from /usr/lib/cni, a bridge of its own, host-local addresses in
// 10.251.<n>.0/24) until the test ends; then the configuration, the plugin
// links and the bridge are removed and containerd is back on its
// loopback-only configuration. It returns the subnet.
func bridgeNetwork(t *testing.T, c *containerdtest.Containerd) *net.IPNet {
	t.Helper()
	const plugins = "/usr/lib/cni"
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(plugins, p)); err != nil {
			t.Skipf("CNI plugin %s: %v", p, err)
		}
	}
	ctx := context.Background()
	if err := c.EnableNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	binDir, confDir := filepath.Join(c.Dir, "cni", "bin"), filepath.Join(c.Dir, "cni", "conf")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		link := filepath.Join(binDir, p)
		if err := os.Symlink(filepath.Join(plugins, p), link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(link) })
	}
	n := rand.IntN(200) + 20
	bridge := fmt.Sprintf("nkbr%d", n)
	_, subnet, _ := net.ParseCIDR(fmt.Sprintf("10.251.%d.0/24", n))
	conf := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": %q, "plugins": [{"type": "bridge", "bridge": %q,
  "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "subnet": %q, "dataDir": %q}}]}`,
		bridge, bridge, subnet.String(), t.TempDir())
	file := filepath.Join(confDir, "05-"+bridge+".conflist")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded := func() string {
		st, err := c.RuntimeClient().Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
		if err != nil {
			return ""
		}
		return st.GetInfo()["cniconfig"]
	}
	t.Cleanup(func() {
		_ = os.Remove(file)
		testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "containerd back on its own CNI config", func() bool {
			return !strings.Contains(loaded(), bridge)
		})
		if out, err := exec.Command("ip", "link", "del", bridge).CombinedOutput(); err != nil {
			t.Errorf("removing bridge %s: %v: %s", bridge, err, out)
		}
	})
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "containerd loads the bridge config", func() bool {
		return strings.Contains(loaded(), bridge)
	})
	return subnet
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
