package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/controlplane"
	"github.com/nodekit/nodekit/internal/mountinfo"
	"github.com/nodekit/nodekit/internal/testenv"
)

// The two kinds of node.
const (
	kubelet = "kubelet"
	nodekit = "nodekit"
)

// node is one running node agent process with its own identity, proxy and
// directory.
type node struct {
	b       *bench
	kind    string
	name    string
	dir     string // root dir, logs, manifests, config
	logDir  string // pod logs
	static  string // static pod manifests
	proxy   *testenv.Proxy
	cmd     *exec.Cmd
	log     string
	started time.Time
	done    chan struct{}
	waitErr error

	cleanOnce sync.Once
}

// startNode starts an agent of kind as node name, with a Ready watch
// opened before the process starts. Its clean-up is registered with t.
func (b *bench) startNode(kind, name string) (*node, <-chan time.Time) {
	t := b.t
	t.Helper()
	dir, err := os.MkdirTemp("", "nodekit-bench-"+kind+"-")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{b: b, kind: kind, name: name, dir: dir, done: make(chan struct{}),
		logDir: filepath.Join(dir, "pods-logs"), static: filepath.Join(dir, "manifests"),
		log: filepath.Join(dir, kind+".log")}
	t.Cleanup(n.clean)
	for _, d := range []string{n.logDir, n.static, filepath.Join(dir, "root")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := b.cp.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, n.proxy, err = testenv.ProxyConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "node.kubeconfig")
	if err := controlplane.WriteKubeconfig(cfg, kc); err != nil {
		t.Fatal(err)
	}
	var args []string
	switch kind {
	case kubelet:
		args = n.kubeletArgs(kc)
	case nodekit:
		args = n.agentArgs(kc)
	}
	logf, err := os.Create(n.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ready := b.watchNodeReady(name)
	n.cmd = exec.Command(args[0], args[1:]...)
	n.cmd.Dir = dir
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	// Pdeathsig: the agent dies with the test process even when that is
	// killed before its clean-ups run.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	n.started = time.Now()
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.waitErr = n.cmd.Wait(); close(n.done) }()
	return n, ready
}

// kubeletArgs writes the kubelet's configuration and returns its command
// line: the configuration that works on the development machines (see
// KUBELET-REFERENCE.md's last section), on free local ports.
func (n *node) kubeletArgs(kubeconfig string) []string {
	b := n.b
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %q
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %q
authorization:
  mode: Webhook
address: %q
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
staticPodPath: %q
podLogsDir: %q
volumePluginDir: %q
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
resolvConf: ""
maxPods: %d
nodeLeaseDurationSeconds: %d
nodeStatusReportFrequency: %s
`, b.c.Endpoint, b.c.CgroupRoot, b.cp.ClientCAFile(), b.nodeIP, freePort(b.t), freePort(b.t), n.static, n.logDir, filepath.Join(n.dir, "volume-plugins"),
		b.maxPods, int(leaseDuration/time.Second), statusReportFrequency)
	path := filepath.Join(n.dir, "kubelet-config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		b.t.Fatal(err)
	}
	return []string{b.kubeletBin,
		"--config=" + path,
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + n.name,
		"--node-ip=" + b.nodeIP,
		"--root-dir=" + filepath.Join(n.dir, "root"),
		"--v=0",
	}
}

// agentArgs returns the agent's command line, the kubelet's set-up in its
// flags.
func (n *node) agentArgs(kubeconfig string) []string {
	b := n.b
	return append([]string{b.agentBin,
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + n.name,
		"--node-ip=" + b.nodeIP,
		"--container-runtime-endpoint=" + b.c.Endpoint,
		"--cgroup-driver=cgroupfs",
		"--cgroup-root=" + b.c.CgroupRoot,
		"--root-dir=" + filepath.Join(n.dir, "root"),
		"--pod-log-root=" + n.logDir,
		"--pod-manifest-path=" + n.static,
		"--resolv-conf=",
		"--listen=127.0.0.1:" + strconv.Itoa(freePort(b.t)),
		// The node API, as the kubelet serves its own: at the node IP,
		// which metrics-server dials, with token review and webhook
		// authorization (the agent's defaults with a kubeconfig).
		"--address=" + b.nodeIP,
		"--port=" + strconv.Itoa(freePort(b.t)),
		"--cert-dir=" + filepath.Join(n.dir, "pki"),
		// Both trust the API server's client certificate, for the
		// node proxy (the scraped window reads /metrics through it).
		"--client-ca-file=" + b.cp.ClientCAFile(),
		// The kubelet's thresholds: the shared disk must not evict.
		"--image-gc-high-threshold=100", "--image-gc-low-threshold=99",
		"--eviction-hard=memory.available<1Mi,nodefs.available<1%,nodefs.inodesFree<1%,imagefs.available<1%",
		// The kubelet's configuration's maxPods and heartbeat.
		"--max-pods=" + strconv.Itoa(b.maxPods),
		"--node-lease-duration-seconds=" + strconv.Itoa(int(leaseDuration/time.Second)),
		"--node-status-report-frequency=" + statusReportFrequency.String(),
		"-v=0",
	}, b.agentExtra...)
}

func (n *node) pid() int { return n.cmd.Process.Pid }

// alive fails the test when the process has exited.
func (n *node) alive() {
	select {
	case <-n.done:
		n.b.t.Fatalf("%s exited: %v; its log ends with:\n%s", n.kind, n.waitErr, tail(n.log, 40))
	default:
	}
}

// stop sends SIGTERM to the process group and SIGKILL after 10s.
func (n *node) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	select {
	case <-n.done:
	default:
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		select {
		case <-n.done:
		case <-t.C:
			n.b.t.Logf("%s did not exit within 10s of SIGTERM; killing it", n.kind)
		}
		t.Stop()
	}
	// Whatever is left of its process group.
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

// clean stops the node and removes what it left, and fails the test for
// what could not be removed.
func (n *node) clean() {
	n.cleanOnce.Do(func() {
		t, b := n.b.t, n.b
		n.stop()
		if n.proxy != nil {
			n.proxy.Close()
		}
		if t.Failed() {
			t.Logf("%s log ends with:\n%s", n.kind, tail(n.log, 60))
		}
		if d := os.Getenv("BENCH_LOG_DIR"); d != "" {
			if data, err := os.ReadFile(n.log); err == nil {
				_ = os.WriteFile(filepath.Join(d, n.name+".log"), data, 0o644)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var errs []error
		// Sandboxes: one node runs at a time, so every sandbox is this
		// node's. Containers the runtime refuses to remove while their
		// task runs (containerd 1.6 keeps those whose start timed out)
		// are killed through the node's cgroups and, when that is not
		// enough, through their shims, and the removal is tried again
		// after each.
		if err := removeSandboxes(ctx, b.rt); err != nil {
			for _, step := range []struct {
				what string
				kill func(context.Context) error
			}{
				{"the processes below kubepods", func(ctx context.Context) error { return b.c.KillBelow(ctx, "kubepods") }},
				{"the shims", b.c.KillShims},
			} {
				report("%s: removing the sandboxes left: %v; killing %s and trying again", n.kind, err, step.what)
				kctx, kcancel := context.WithTimeout(context.Background(), time.Minute)
				if err = step.kill(kctx); err == nil {
					err = removeSandboxes(kctx, b.rt)
				}
				kcancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing sandboxes: %w", err))
			}
		}
		if err := b.c.RemoveCgroupsBelow(ctx, "kubepods"); err != nil {
			errs = append(errs, err)
		}
		if err := unmountBelow(n.dir); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, removeLinksInto("/var/log/containers", n.dir)...)
		errs = append(errs, b.host.restore()...)
		errs = append(errs, b.host.removeChains()...)
		if err := os.RemoveAll(n.dir); err != nil {
			errs = append(errs, err)
		}
		if left := b.host.leftovers(); len(left) > 0 {
			errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
		}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("cleaning up after %s %s: %v", n.kind, n.name, err)
		}
	})
}

// removeSandboxes stops and removes every pod sandbox with its containers
// until none is listed. NotFound is not an error: what the stopped agent
// had begun to remove may still be going.
func removeSandboxes(ctx context.Context, rt runtimeapi.RuntimeServiceClient) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err == nil && len(resp.GetItems()) == 0 {
			return nil
		}
		var errs []error
		if err != nil {
			errs = append(errs, err)
		}
		for _, sb := range resp.GetItems() {
			if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil && status.Code(err) != codes.NotFound {
				errs = append(errs, err)
			}
			if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil && status.Code(err) != codes.NotFound {
				errs = append(errs, err)
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(append(errs, ctx.Err())...)
		case <-tick.C:
		}
	}
}

// mountsBelow returns the mount points at or under dir, deepest first.
func mountsBelow(dir string) []string {
	ms, _ := mountinfo.Read(mountinfo.Self)
	var out []string
	for _, m := range ms {
		if m.Mountpoint == dir || strings.HasPrefix(m.Mountpoint, dir+"/") {
			out = append(out, m.Mountpoint)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// unmountBelow unmounts everything at or under dir, deepest first (the
// kubelet makes its root dir a shared bind mount of itself); a busy mount
// is detached. A directory mounted several times is unmounted as often.
func unmountBelow(dir string) error {
	for range 20 {
		mounts := mountsBelow(dir)
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	if m := mountsBelow(dir); len(m) > 0 {
		return fmt.Errorf("still mounted: %v", m)
	}
	return nil
}

// removeLinksInto removes the symbolic links in dir that point below
// target (the kubelet's /var/log/containers links to its pods' logs).
func removeLinksInto(dir, target string) []error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		dst, err := os.Readlink(p)
		if err == nil && strings.HasPrefix(dst, target+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// hostState is what a node agent may change outside its own directory,
// recorded before the first node starts, put back (restore) and checked
// (leftovers) after each.
type hostState struct {
	sysctls map[string]string // kernel tunables the kubelet sets
	absent  []string          // paths that did not exist
	chains  map[string]bool   // iptables table/chain names
	links   map[string]bool   // network interfaces
}

// kubeletSysctls are the tunables the kubelet sets when
// protectKernelDefaults is false.
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// pathsAgentsCreate are paths outside a node's directory that an agent
// creates whatever its root dir: the kubelet's device-plugin socket and
// container log links, and the default pod log and volume plugin
// directories.
var pathsAgentsCreate = []string{
	"/var/lib/kubelet", "/var/log/containers", "/var/log/pods",
	"/usr/libexec/kubernetes",
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func recordHost() *hostState {
	h := &hostState{sysctls: map[string]string{}, chains: iptablesChains(), links: netLinks()}
	for _, s := range kubeletSysctls {
		if v, err := os.ReadFile(sysctlPath(s)); err == nil {
			h.sysctls[s] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range pathsAgentsCreate {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			h.absent = append(h.absent, p)
		}
	}
	return h
}

// restore puts the kernel tunables back and removes the paths that did not
// exist before.
func (h *hostState) restore() []error {
	var errs []error
	for s, want := range h.sysctls {
		p := sysctlPath(s)
		if v, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(v)) != want {
			if err := os.WriteFile(p, []byte(want), 0); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s to %s: %w", s, want, err))
			}
		}
	}
	for _, p := range h.absent {
		if err := unmountBelow(p); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// leftovers lists what differs from the recorded state: tunables, paths,
// and (logged, not removed: other processes on the machine may make them
// too) new iptables chains and network interfaces.
func (h *hostState) leftovers() []string {
	var out []string
	for s, want := range h.sysctls {
		if v, err := os.ReadFile(sysctlPath(s)); err == nil && strings.TrimSpace(string(v)) != want {
			out = append(out, fmt.Sprintf("%s=%s (was %s)", s, strings.TrimSpace(string(v)), want))
		}
	}
	for _, p := range h.absent {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// removeChains removes the iptables chains named KUBE-* that did not exist
// when h was recorded (the kubelet's KUBE-FIREWALL, KUBE-KUBELET-CANARY and
// KUBE-IPTABLES-HINT), with the rules of other chains that jump to them.
func (h *hostState) removeChains() []error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		data, err := exec.Command(tool + "-save").Output()
		if err != nil {
			continue
		}
		table := ""
		added := map[string]bool{} // table/chain
		var jumps [][]string       // rules (iptables arguments) that jump to one
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				c := strings.Fields(line[1:])[0]
				if strings.HasPrefix(c, "KUBE-") && !h.chains[tool+"-save "+table+"/"+c] {
					added[table+"/"+c] = true
				}
			case strings.HasPrefix(line, "-A "):
				f := splitRule(line)
				for i := 0; i+1 < len(f); i++ {
					if (f[i] == "-j" || f[i] == "-g") && added[table+"/"+f[i+1]] && !added[table+"/"+f[1]] {
						f[0] = "-D"
						jumps = append(jumps, append([]string{"-w", "-t", table}, f...))
						break
					}
				}
			}
		}
		for _, args := range jumps {
			if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, out))
			}
		}
		for tc := range added {
			table, chain, _ := strings.Cut(tc, "/")
			for _, op := range []string{"-F", "-X"} {
				if out, err := exec.Command(tool, "-w", "-t", table, op, chain).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s %s %s: %v: %s", tool, table, op, chain, err, out))
				}
			}
		}
	}
	return errs
}

// splitRule splits an iptables-save rule into arguments, keeping double
// quoted strings (comments) whole.
func splitRule(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, in := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && quoted && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			quoted, in = !quoted, true
		case c == ' ' && !quoted:
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

var builtinChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// hostNotes lists new iptables chains and network interfaces since h was
// recorded.
func (h *hostState) hostNotes() []string {
	var out []string
	for c := range iptablesChains() {
		// A table's built-in chains show once something loaded the table.
		_, name, _ := strings.Cut(c, "/")
		if !h.chains[c] && !builtinChains[name] {
			out = append(out, "iptables chain "+c)
		}
	}
	for l := range netLinks() {
		if !h.links[l] {
			out = append(out, "network interface "+l+" (new since the start; may be another process's)")
		}
	}
	sort.Strings(out)
	return out
}

// iptablesChains returns "table/chain" for every chain iptables-save and
// ip6tables-save list, or nothing when they are not installed.
func iptablesChains() map[string]bool {
	out := map[string]bool{}
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		data, err := exec.Command(cmd).Output()
		if err != nil {
			continue
		}
		table := ""
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				out[cmd+" "+table+"/"+strings.Fields(line[1:])[0]] = true
			}
		}
	}
	return out
}

func netLinks() map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir("/sys/class/net")
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// freePort returns a TCP port that was free a moment ago on every address.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// defaultRouteIP returns the address the host uses for the default route,
// the node IP of both agents (the kubelet refuses a loopback one).
func defaultRouteIP() (string, error) {
	// No packet is sent: connecting a UDP socket only picks the route.
	c, err := net.Dial("udp", "8.8.8.8:53")
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
