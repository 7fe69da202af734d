// Package containerdtest runs a real containerd for end-to-end tests: its
// own process, root, state, sockets, runc root and cgroup root, with a pause
// and a busybox image built on the spot and imported without any registry.
//
// # Usage
//
// One instance per test package, started in TestMain:
//
//	var ctrd *containerdtest.Containerd
//
//	func TestMain(m *testing.M) { os.Exit(containerdtest.Main(m, &ctrd)) }
//
//	func TestPod(t *testing.T) {
//		c := containerdtest.Need(t, ctrd) // skips when unavailable or in -short mode
//		rt := c.RuntimeClient()            // CRI v1 over c.Endpoint
//		sb := c.SandboxConfig("web", "default", "uid-1")
//		...
//	}
//
// A package that also starts another harness in TestMain wraps it with
// MainFunc:
//
//	os.Exit(containerdtest.MainFunc(func() int { return controlplane.Main(m, &cp) }, &ctrd))
//
// A package whose tests also run on containerd 2 starts both with
// MainBoth, and its containerd 2 tests ask for theirs with Need2 (which
// names `make testbin` when containerd 2 is missing):
//
//	var ctrd, ctrd2 *containerdtest.Containerd
//
//	func TestMain(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }
//
//	func TestPodContainerd2(t *testing.T) { c := containerdtest.Need2(t, ctrd2); ... }
//
// OnBoth runs one test on both, as subtests containerd1 and containerd2,
// one after the other:
//
//	func TestPod(t *testing.T) { containerdtest.OnBoth(t, ctrd, ctrd2, testPod) }
//
// Pod sandboxes use the host network (no CNI is configured; EnableNetwork
// adds a loopback-only one so the runtime reports NetworkReady) and an empty
// hostname; SandboxConfig returns such a config with the io.kubernetes.pod.*
// labels, a log directory under PodLogRoot and a cgroup parent under
// CgroupRoot. BusyboxContainer returns a container config for the busybox
// image. PauseImage and BusyboxImage are imported into the k8s.io namespace,
// unpacked for the snapshotter in use.
//
// # Two containerds
//
// Options.Major chooses which containerd Start runs. 1 (the default) is
// the host's: Debian's containerd 1.6 with its runc shim. 2 is containerd 2
// and containerd-shim-runc-v2 from the test binaries' directory
// (Options.BinDir, default controlplane.BinaryDir: hack/testbin.sh builds
// containerd v2.4.2 there without cgo), with the host's runc, ctr (unless
// BinDir has one) and busybox. Both get the same layout and the same
// settings, in their own config schemas (version 2 for 1.6, version 3 for
// containerd 2, which containerd 2.3 and later migrate to version 4 as
// they start, with a warning in the log). Start checks with the CRI
// Version call that the major version answering is the one asked for, and
// records it in RuntimeVersion. containerd 2 implements what 1.6 answers
// Unimplemented: CRI container events (GetContainerEvents) and sandbox
// metrics (ListPodSandboxMetrics).
//
// # What Start does
//
//   - Checks the prerequisites: root; containerd, containerd-shim-runc-v2
//     (for Major 2 in BinDir), ctr and runc (PATH or the sbin
//     directories); go; a static busybox
//     (Options.BusyboxPath, $NODEKIT_BUSYBOX, or the newest
//     ${NODEKIT_CACHE:-$HOME/.cache/nodekit}/busybox/*/busybox). A missing
//     one gives an error wrapping ErrUnavailable that names it and
//     `make containerd`, which runs hack/containerd-deps.sh to install
//     Debian's containerd and runc and cache busybox from the busybox-static
//     .deb.
//   - Makes a directory nodekit-containerd-* under Options.Dir and writes a
//     config.toml there: root, state, gRPC and ttrpc sockets, runc root (the
//     runc runtime's Root option), cgroupfs (SystemdCgroup = false),
//     restrict_oom_score_adj = true (the test process lacks
//     CAP_SYS_RESOURCE), AppArmor off, the overlayfs snapshotter when an
//     overlay mount works there (else native), sandbox_image set to the
//     local pause image, and the aufs/btrfs/zfs/devmapper snapshotters and
//     the opt and tracing plugins disabled. For containerd 2 also: the shim
//     named by its path (runtime_path), NRI off (its socket would be in
//     /var/run/nri), CDI spec directories and network namespaces inside
//     the instance's directory, and no drop-in configs from /etc.
//   - Starts containerd in its own process group, logging to Log, and polls
//     the CRI v1 Version call until it answers. Meanwhile it builds the pause
//     program (package pause, CGO_ENABLED=0 go build) and writes both images
//     as an OCI layout with package ociimage; then `ctr images import`s it
//     and checks that the CRI image service sees both images.
//
// # Faults
//
// Kill signals the containerd process alone (SIGTERM, its clean shutdown,
// or SIGKILL, a crash) and waits for it to exit; the shims and containers
// run on, as on a node whose containerd stops. Restart starts containerd
// again on the same config, root, state and sockets and waits until its CRI
// service answers; the containers that ran are listed running again.
//
// # What Stop does
//
// Stop touches only what the instance created: it stops and removes every
// CRI pod sandbox (so the shims exit), sends SIGTERM to containerd's PID and
// SIGKILL after a grace period, SIGKILLs any process left whose command line
// names the instance's directory (shims, runc) or that sits in its cgroups
// (containers), removes the sockets of killed shims, removes its cgroup
// directories in every hierarchy (deepest first), unmounts every mount under
// its directory (deepest first, read from /proc/self/mountinfo) and removes
// the directory. It still works when containerd has died.
//
// # Timing
//
// Measured on the two-core development machine (containerd 1.6.20, runc
// 1.1.5, cgroup v1, overlayfs), shared with other builds:
//   - Start: 2-4 s with a warm Go build cache, containerd 2 as 1.6
//     (MainBoth starts both at once); the first build of the pause
//     program on a cold cache compiles the runtime and took about 60 s.
//     Options.StartTimeout (default 3 min) bounds it.
//   - Stop: 0.5-0.7 s with a running pod, also after containerd was killed.
//   - A host-network sandbox plus a busybox container to its first log
//     line, an exec and removal: about 1.5 s.
//
// # Limits
//
// Root only, Linux only. An instance left by a test process that was killed
// with SIGKILL is not cleaned up by later runs (containerd itself dies with
// the test process, the shims and containers do not). The shims of
// containerd 1.6 and 2 put their sockets in /run/containerd/s whatever the
// config says; Stop finds them through the "address" file (1.6) or
// bootstrap.json (containerd 2) in each shim's bundle directory and
// removes them, not the directory. This is test support: it uses the wall
// clock and polls with short tickers under deadlines.
package containerdtest
