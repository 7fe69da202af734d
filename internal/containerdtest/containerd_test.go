package containerdtest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/testenv"
)

// ctrd is the host's containerd 1.x, ctrd2 containerd 2 from the test
// binaries.
var ctrd, ctrd2 *Containerd

func TestMain(m *testing.M) { os.Exit(MainBoth(m.Run, &ctrd, &ctrd2)) }

// runBusybox runs a host-network sandbox with one busybox container that
// prints a line and sleeps, and returns the sandbox and container IDs and the
// container's log path.
func runBusybox(t *testing.T, ctx context.Context, c *Containerd, pod string) (sandboxID, containerID, logPath string) {
	t.Helper()
	rt := c.RuntimeClient()
	sbConfig := c.SandboxConfig(pod, "default", "uid-"+pod)
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbConfig})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	sandboxID = sb.PodSandboxId

	ctrConfig := c.BusyboxContainer("main", "sh", "-c", "echo hello-from-busybox; exec sleep 3600")
	created, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID, Config: ctrConfig, SandboxConfig: sbConfig,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	containerID = created.ContainerId
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return sandboxID, containerID, filepath.Join(sbConfig.LogDirectory, ctrConfig.LogPath)
}

func TestSmoke(t *testing.T) { smoke(t, Need(t, ctrd)) }

// TestSmokeContainerd2 is TestSmoke on containerd 2.
func TestSmokeContainerd2(t *testing.T) { smoke(t, Need2(t, ctrd2)) }

// TestVersions checks with the CRI Version call that each instance is the
// containerd it was asked for: the host's 1.x and containerd 2.
func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		need  func(testing.TB, *Containerd) *Containerd
		c     *Containerd
		major int
	}{{"containerd1", Need, ctrd, 1}, {"containerd2", Need2, ctrd2, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.need(t, tc.c)
			v, err := c.RuntimeClient().Version(context.Background(), &runtimeapi.VersionRequest{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s, CRI %s", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
			major, err := majorVersion(v.RuntimeVersion)
			if v.RuntimeName != "containerd" || err != nil || major != tc.major || c.Major != tc.major {
				t.Errorf("runtime %s %s (major %d, %v), Major field %d: want containerd %d.x", v.RuntimeName, v.RuntimeVersion, major, err, c.Major, tc.major)
			}
			if v.RuntimeVersion != c.RuntimeVersion || v.RuntimeApiVersion != "v1" {
				t.Errorf("RuntimeVersion field %q, CRI %q: want %q and v1", c.RuntimeVersion, v.RuntimeApiVersion, v.RuntimeVersion)
			}
		})
	}
}

func TestMajorVersion(t *testing.T) {
	for v, want := range map[string]int{"1.6.20~ds1": 1, "v1.7.0": 1, "v2.4.2": 2, "2.4.2+unknown": 2, "v10.0.1": 10} {
		if got, err := majorVersion(v); err != nil || got != want {
			t.Errorf("majorVersion(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"", "v", "2", "x.1", ".1"} {
		if got, err := majorVersion(v); err == nil {
			t.Errorf("majorVersion(%q) = %d, nil; want an error", v, got)
		}
	}
}

func smoke(t *testing.T, c *Containerd) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := c.RuntimeClient()

	v, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("runtime %s %s, CRI %s", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)

	sandboxID, containerID, logPath := runBusybox(t, ctx, c, "smoke")

	sbStatus, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
	if err != nil {
		t.Fatal(err)
	}
	if got := sbStatus.GetStatus().GetLinux().GetNamespaces().GetOptions().GetNetwork(); got != runtimeapi.NamespaceMode_NODE {
		t.Errorf("sandbox network namespace mode = %v, want NODE", got)
	}
	if got := sbStatus.GetStatus().GetState(); got != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("sandbox state = %v, want READY", got)
	}

	// The line comes back through the CRI log file:
	// "<RFC3339Nano timestamp> stdout F hello-from-busybox".
	var line string
	testenv.EventuallyErr(t, 30*time.Second, 50*time.Millisecond, "the container's log line", func() (bool, error) {
		f, err := os.Open(logPath)
		if err != nil {
			return false, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasSuffix(sc.Text(), " hello-from-busybox") {
				line = sc.Text()
				return true, nil
			}
		}
		return false, errors.New("line not logged yet")
	})
	fields := strings.SplitN(line, " ", 4)
	if len(fields) != 4 || fields[1] != "stdout" || fields[2] != "F" || fields[3] != "hello-from-busybox" {
		t.Errorf("log line %q is not in the CRI format", line)
	} else if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
		t.Errorf("log line timestamp %q: %v", fields[0], err)
	}

	exec, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: []string{"echo", "exec-ok"}, Timeout: 10})
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	if exec.ExitCode != 0 || string(exec.Stdout) != "exec-ok\n" {
		t.Errorf("ExecSync = exit %d, stdout %q, stderr %q", exec.ExitCode, exec.Stdout, exec.Stderr)
	}
	// The busybox image: /bin/sh works, applets are on PATH, hostname is the node's.
	exec, err = rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: []string{"/bin/sh", "-c", "ls /bin/cat && env | grep -c ^PATH= && hostname"}, Timeout: 10})
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	host, _ := os.Hostname()
	if want := "/bin/cat\n1\n" + host + "\n"; exec.ExitCode != 0 || string(exec.Stdout) != want {
		t.Errorf("ExecSync = exit %d, stdout %q (want %q), stderr %q", exec.ExitCode, exec.Stdout, want, exec.Stderr)
	}

	if _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: 0}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxID}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxID}); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list.Items {
		if sb.Id == sandboxID {
			t.Errorf("sandbox %s still listed after removal", sandboxID)
		}
	}
}

// TestIDMapHandler: containerd 2 reports user namespaces for its
// runc-idmap handler (the test binaries' runc), and not for the default
// one (Debian's runc); containerd 1.6 has no such handler.
func TestIDMapHandler(t *testing.T) {
	if c := Need(t, ctrd); c.IDMapHandler != "" {
		t.Errorf("containerd 1.6: IDMapHandler %q", c.IDMapHandler)
	}
	c := Need2(t, ctrd2)
	if c.IDMapHandler != IDMapRuntimeHandler {
		t.Skipf("no %s handler: the test binaries have no runc", IDMapRuntimeHandler)
	}
	st, err := c.RuntimeClient().Status(context.Background(), &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	userns := map[string]bool{}
	for _, h := range st.GetRuntimeHandlers() {
		userns[h.GetName()] = h.GetFeatures().GetUserNamespaces()
	}
	t.Logf("handlers (user namespaces): %v", userns)
	if got, ok := userns[IDMapRuntimeHandler]; !ok || !got {
		t.Errorf("%s: user namespaces %v (reported %v)", IDMapRuntimeHandler, got, ok)
	}
	if userns["runc"] || userns[""] {
		t.Errorf("the default handler reports user namespaces: %v", userns)
	}
}
