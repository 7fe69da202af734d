package containerdtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CNIPluginDir is where EnableBridge finds the bridge, host-local and
// loopback plugins (Debian's containernetworking-plugins, which
// hack/containerd-deps.sh installs).
const CNIPluginDir = "/usr/lib/cni"

// Bridge is a bridge CNI network EnableBridge gave the instance.
type Bridge struct {
	// Name is the bridge interface's name (nkbr<n>).
	Name string
	// Subnet is the network pods get their addresses from (host-local).
	Subnet *net.IPNet

	c    *Containerd
	file string // the CNI configuration written
}

// ErrNoCNIPlugins is wrapped by EnableBridge's error when a plugin is
// missing from CNIPluginDir.
var ErrNoCNIPlugins = errors.New("containerdtest: CNI plugins missing")

// EnableBridge gives the instance a bridge CNI network: links to the
// bridge, host-local and loopback plugins of CNIPluginDir in its CNI bin
// directory, a bridge of its own (nkbr<n>, a gateway, no masquerading) and
// host-local addresses in 10.251.<n>.0/24, n random. Pods that do not use
// the host network get their own address from it. It returns once the
// runtime has loaded the configuration; Remove undoes it.
func (c *Containerd) EnableBridge(ctx context.Context) (*Bridge, error) {
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIPluginDir, p)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoCNIPlugins, err)
		}
	}
	if err := c.EnableNetwork(ctx); err != nil {
		return nil, err
	}
	binDir, confDir := filepath.Join(c.Dir, "cni", "bin"), filepath.Join(c.Dir, "cni", "conf")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		link := filepath.Join(binDir, p)
		if err := os.Symlink(filepath.Join(CNIPluginDir, p), link); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
	}
	n := rand.IntN(200) + 20
	b := &Bridge{Name: fmt.Sprintf("nkbr%d", n), c: c}
	_, b.Subnet, _ = net.ParseCIDR(fmt.Sprintf("10.251.%d.0/24", n))
	ipam := filepath.Join(c.Dir, "cni", "ipam-"+b.Name)
	conf := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": %q, "plugins": [{"type": "bridge", "bridge": %q,
  "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "subnet": %q, "dataDir": %q}}]}`,
		b.Name, b.Name, b.Subnet.String(), ipam)
	b.file = filepath.Join(confDir, "05-"+b.Name+".conflist")
	if err := os.WriteFile(b.file, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if err := b.waitLoaded(ctx, true); err != nil {
		_ = b.Remove(context.Background())
		return nil, err
	}
	return b, nil
}

// loaded reports whether the runtime's CNI configuration names the bridge.
func (b *Bridge) loaded(ctx context.Context) bool {
	st, err := b.c.RuntimeClient().Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	return err == nil && strings.Contains(st.GetInfo()["cniconfig"], b.Name)
}

func (b *Bridge) waitLoaded(ctx context.Context, want bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for b.loaded(ctx) != want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerdtest: the runtime's CNI configuration still %s bridge %s: %w",
				map[bool]string{true: "lacks", false: "has"}[want], b.Name, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// Remove removes the bridge's configuration, waits until the runtime is
// back on its loopback-only one, and deletes the bridge interface. Pods on
// the bridge must be gone first.
func (b *Bridge) Remove(ctx context.Context) error {
	var errs []error
	if err := os.Remove(b.file); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if b.c.running() {
		if err := b.waitLoaded(ctx, false); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := net.InterfaceByName(b.Name); err == nil {
		if out, err := exec.CommandContext(ctx, "ip", "link", "del", b.Name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("removing bridge %s: %v: %s", b.Name, err, out))
		}
	}
	return errors.Join(errs...)
}
