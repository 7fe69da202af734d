package containerdtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/controlplane"
)

// prerequisites2 finds what Options.Major 2 runs: containerd and
// containerd-shim-runc-v2 from BinDir (hack/testbin.sh builds them), ctr
// from BinDir or the host, and, as for containerd 1.x, the host's runc, go
// and the cached busybox.
func prerequisites2(opts *Options) (binaries, error) {
	var b binaries
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (running as uid "+fmt.Sprint(os.Geteuid())+")")
	}
	dir := opts.BinDir
	if dir == "" {
		d, err := controlplane.BinaryDir()
		if err != nil {
			missing = append(missing, fmt.Sprintf("the test binaries' directory (%v)", err))
		}
		dir = d
	}
	if dir != "" {
		for _, bin := range []struct {
			name string
			dst  *string
		}{{"containerd", &b.containerd}, {"containerd-shim-runc-v2", &b.shim}} {
			p := filepath.Join(dir, bin.name)
			if !executable(p) {
				missing = append(missing, p)
				continue
			}
			*bin.dst = p
		}
		if p := filepath.Join(dir, "ctr"); executable(p) {
			b.ctr = p
		}
		if p := filepath.Join(dir, "runc"); executable(p) {
			b.idmapRunc = p
		}
	}
	missing = b.hostTools(opts, missing)
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: containerd 2: missing %s; `make testbin` (hack/testbin.sh) builds containerd 2 and its shim, `make containerd` (hack/containerd-deps.sh, as root) provides runc, ctr and busybox",
			ErrUnavailable, strings.Join(missing, ", "))
	}
	return b, nil
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// checkVersion asks the CRI Version call which containerd answers, records
// it in RuntimeVersion, and fails when its major version is not the one
// Options.Major asked for.
func (c *Containerd) checkVersion(ctx context.Context) error {
	v, err := c.RuntimeClient().Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return fmt.Errorf("containerdtest: CRI Version: %w", err)
	}
	c.RuntimeVersion = v.GetRuntimeVersion()
	major, err := majorVersion(c.RuntimeVersion)
	if err != nil || v.GetRuntimeName() != "containerd" {
		return fmt.Errorf("containerdtest: the runtime calls itself %q version %q, want containerd %d.x", v.GetRuntimeName(), c.RuntimeVersion, c.opts.Major)
	}
	if major != c.opts.Major {
		return fmt.Errorf("containerdtest: the containerd started is version %s, want %d.x (Options.Major)", c.RuntimeVersion, c.opts.Major)
	}
	return nil
}

// majorVersion returns the major version of a containerd version string:
// "1.6.20~ds1" and "v1.6.20" are 1, "v2.4.2" and "2.4.2+unknown" are 2.
func majorVersion(v string) (int, error) {
	s := strings.TrimPrefix(v, "v")
	i := strings.IndexByte(s, '.')
	if i <= 0 {
		return 0, fmt.Errorf("version %q has no major.minor", v)
	}
	return strconv.Atoi(s[:i])
}

// disabledPlugins2 are the containerd 2 plugins the tests do not use and
// that would touch what the harness must not (/opt/containerd, an OTLP
// endpoint); the snapshotters that need kernel features are not built in.
var disabledPlugins2 = []string{
	"io.containerd.internal.v1.opt",
	"io.containerd.tracing.processor.v1.otlp",
	"io.containerd.internal.v1.tracing",
	"io.containerd.snapshotter.v1.blockfile",
}

// IDMapRuntimeHandler is the name of containerd 2's second runtime
// handler, whose BinaryName is the test binaries' runc (v1.4, built by
// hack/testbin.sh): it makes ID-mapped mounts, so containerd reports user
// namespaces for this handler and not for the default one (Debian's runc
// 1.1 cannot). That runc is built without seccomp: a container it runs
// may ask for no seccomp profile.
const IDMapRuntimeHandler = "runc-idmap"

// config3 returns containerd 2's config.toml (schema version 3): what the
// schema 2 config sets, under the plugins containerd 2 split the CRI plugin
// into (io.containerd.cri.v1.images, io.containerd.cri.v1.runtime,
// io.containerd.grpc.v1.cri), plus what containerd 2 would otherwise put
// outside the instance's directory: NRI's socket (NRI is off), CDI spec
// directories and network namespaces (under State).
func (c *Containerd) config3(bins binaries) string {
	q := strconv.Quote
	list := make([]string, len(disabledPlugins2))
	for i, p := range disabledPlugins2 {
		list[i] = q(p)
	}
	return fmt.Sprintf(`version = 3
root = %[1]s
state = %[2]s
disabled_plugins = [%[3]s]
oom_score = 0

[grpc]
  address = %[4]s

[ttrpc]
  address = %[5]s

[debug]
  address = ""
  level = %[6]s

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = %[7]s
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[8]s
  [plugins.'io.containerd.cri.v1.runtime']
    # The process lacks CAP_SYS_RESOURCE, so it may not lower oom_score_adj.
    restrict_oom_score_adj = true
    disable_apparmor = true
    enable_selinux = false
    max_container_log_line_size = 16384
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = [%[9]s]
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = %[10]s
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %[11]s
          Root = %[12]s
          SystemdCgroup = false
%[15]s    # Pod sandboxes use the host network; no CNI plugin is ever called.
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[13]s]
      conf_dir = %[14]s
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`,
		q(c.Root), q(c.State), strings.Join(list, ", "),
		q(c.Address), q(c.Address+".ttrpc"),
		q(c.opts.LogLevel),
		q(c.Snapshotter), q(c.PauseImage),
		q(filepath.Join(c.Dir, "cdi")),
		q(bins.shim), q(bins.runc), q(c.RuncRoot),
		q(filepath.Join(c.Dir, "cni", "bin")), q(filepath.Join(c.Dir, "cni", "conf")),
		c.idmapRuntime(bins),
	)
}

// idmapRuntime is the config of IDMapRuntimeHandler, "" without the test
// binaries' runc. Its runc state is a directory of its own beside
// RuncRoot.
func (c *Containerd) idmapRuntime(bins binaries) string {
	if bins.idmapRunc == "" {
		return ""
	}
	q := strconv.Quote
	return fmt.Sprintf(`      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = %[2]s
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s.options]
          BinaryName = %[3]s
          Root = %[4]s
          SystemdCgroup = false
`, IDMapRuntimeHandler, q(bins.shim), q(bins.idmapRunc), q(c.RuncRoot+"-idmap"))
}
