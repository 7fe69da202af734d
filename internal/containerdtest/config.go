package containerdtest

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// disabledPlugins are containerd plugins the tests do not use and that would
// need things this harness does not have or should not touch (kernel
// modules, block devices, /opt/containerd, an OTLP endpoint). The legacy v1
// runtime stays: containerd 1.6's task service requires it.
var disabledPlugins = []string{
	"io.containerd.snapshotter.v1.aufs",
	"io.containerd.snapshotter.v1.btrfs",
	"io.containerd.snapshotter.v1.zfs",
	"io.containerd.snapshotter.v1.devmapper",
	"io.containerd.internal.v1.opt",
	"io.containerd.tracing.processor.v1.otlp",
	"io.containerd.internal.v1.tracing",
}

// config returns containerd's config.toml: schema version 2 for containerd
// 1.6, version 3 (config3) for containerd 2.
func (c *Containerd) config(bins binaries) string {
	if c.opts.Major == 2 {
		return c.config3(bins)
	}
	q := strconv.Quote
	list := "["
	for i, p := range disabledPlugins {
		if i > 0 {
			list += ", "
		}
		list += q(p)
	}
	list += "]"
	return fmt.Sprintf(`version = 2
root = %[1]s
state = %[2]s
disabled_plugins = %[3]s
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
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[7]s
    # The process lacks CAP_SYS_RESOURCE, so it may not lower oom_score_adj.
    restrict_oom_score_adj = true
    disable_apparmor = true
    enable_selinux = false
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_cdi = false
    max_container_log_line_size = 16384
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = %[8]s
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = %[9]s
          Root = %[10]s
          SystemdCgroup = false
    # Pod sandboxes use the host network; no CNI plugin is ever called.
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[11]s
      conf_dir = %[12]s
`,
		q(c.Root), q(c.State), list,
		q(c.Address), q(c.Address+".ttrpc"),
		q(c.opts.LogLevel),
		q(c.PauseImage),
		q(c.Snapshotter),
		q(bins.runc), q(c.RuncRoot),
		q(filepath.Join(c.Dir, "cni", "bin")), q(filepath.Join(c.Dir, "cni", "conf")),
	)
}
