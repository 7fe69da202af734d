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
// MainFunc wraps another harness's TestMain. MainBoth starts containerd 1.6
// and 2 at once; Need2 asks for containerd 2 (naming `make testbin` when it
// is missing), and OnBoth runs one test on both as subtests containerd1 and
// containerd2:
//
//	func TestMain(m *testing.M) { os.Exit(containerdtest.MainBoth(m.Run, &ctrd, &ctrd2)) }
//	func TestPod(t *testing.T)  { containerdtest.OnBoth(t, ctrd, ctrd2, testPod) }
//
// Pod sandboxes use the host network (no CNI; EnableNetwork adds a
// loopback-only one so the runtime reports NetworkReady); EnableBridge
// gives pods their own addresses on a bridge of the instance's own. SandboxConfig and
// BusyboxContainer return configs with the kubelet's labels, a log
// directory under PodLogRoot and a cgroup parent under CgroupRoot.
//
// Options.Major chooses the containerd: 1 (the default) is the host's,
// Debian's 1.6; 2 is containerd 2 and its runc shim from the test binaries'
// directory (Options.BinDir; hack/testbin.sh builds v2.4.2), with the same
// layout and settings in its own config schema. Start checks with the CRI
// Version call that the major version asked for answers (RuntimeVersion).
// containerd 2 also has CRI container events and sandbox metrics, and,
// when the test binaries have their runc (v1.4, built without seccomp), a
// second runtime handler IDMapRuntimeHandler ("runc-idmap",
// Containerd.IDMapHandler) running it: containerd reports user namespaces
// for that handler only, so pods with hostUsers false run there, asking
// for no seccomp profile.
//
// Start checks the prerequisites (root; containerd, its shim, ctr, runc,
// go and a static busybox; a missing one is an error wrapping
// ErrUnavailable that names `make containerd`), writes a config.toml in a
// directory of its own under Options.Dir, starts containerd in its own
// process group and imports the images. Kill signals containerd alone
// (SIGTERM or SIGKILL) and leaves the shims and containers running;
// Restart starts it again on the same state. Stop touches only what the
// instance created: pod sandboxes, its processes, shim sockets, cgroups,
// mounts and directory, also after containerd died.
//
// # Timing
//
// Options.StartTimeout (3 min) bounds Start. Measured start, stop and pod
// times are in BENCHMARKS.md.
//
// # Limits
//
// Root only, Linux only. An instance left by a test process killed with
// SIGKILL is not cleaned up by later runs (containerd dies with the test
// process, the shims and containers do not). The shims put their sockets in
// /run/containerd/s whatever the config says; Stop removes those of its own
// shims, not the directory. This is test support: it uses the wall clock
// and polls with short tickers under deadlines.
package containerdtest
