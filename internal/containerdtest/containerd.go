package containerdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/optcheck"
)

// ErrUnavailable is wrapped by the error Start returns when something the
// harness needs from the machine is missing: root, the containerd, runc and
// ctr binaries, the cached busybox, or the go command. `make containerd`
// provides all but root.
var ErrUnavailable = errors.New("containerd test harness unavailable")

// Image references the harness imports into the k8s.io namespace.
const (
	PauseImage   = "localhost/nodekit/pause:test"
	BusyboxImage = "localhost/nodekit/busybox:test"
)

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Dir is where the instance's temporary directory is created; default
	// os.TempDir(). The path must stay short: containerd's socket lives in it
	// and a unix socket path has at most 107 bytes.
	Dir string
	// BusyboxPath is a static busybox binary; default $NODEKIT_BUSYBOX, else
	// the newest ${NODEKIT_CACHE:-$HOME/.cache/nodekit}/busybox/*/busybox that
	// hack/containerd-deps.sh caches.
	BusyboxPath string
	// Snapshotter is "overlayfs" or "native"; default "overlayfs" when an
	// overlay mount works in Dir, else "native".
	Snapshotter string
	// StartTimeout bounds Start when its context has no deadline; default 3m
	// (the first build of the pause program compiles the Go runtime).
	// Between 1s and 30m.
	StartTimeout time.Duration
	// StopTimeout bounds Stop; default 30s. Between 1s and 10m.
	StopTimeout time.Duration
	// LogLevel is containerd's log level; default "info".
	LogLevel string
	// Major chooses the containerd: 0 or 1 is the host's containerd 1.x
	// (Debian's 1.6, found on PATH or in the sbin directories) with a
	// config in schema version 2; 2 is containerd 2 with its runc shim from
	// BinDir, with a config in schema version 3. Start checks that the
	// major version the CRI Version call reports is this one.
	Major int
	// BinDir is where Major 2 finds containerd and containerd-shim-runc-v2
	// (and ctr, if it is there; else the host's ctr imports the images).
	// Default: the test binaries' directory that hack/testbin.sh builds
	// them into (controlplane.BinaryDir: $KUBEBUILDER_ASSETS, else its
	// cache). Unused for Major 1.
	BinDir string
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if err := optcheck.Range("containerdtest: Options.StartTimeout", o.StartTimeout, time.Second, 30*time.Minute); err != nil {
		return err
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 30 * time.Second
	}
	if err := optcheck.Range("containerdtest: Options.StopTimeout", o.StopTimeout, time.Second, 10*time.Minute); err != nil {
		return err
	}
	switch o.Snapshotter {
	case "", "overlayfs", "native":
	default:
		return fmt.Errorf("Options.Snapshotter %q is neither overlayfs nor native", o.Snapshotter)
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	switch o.Major {
	case 0:
		o.Major = 1
	case 1, 2:
	default:
		return fmt.Errorf("Options.Major %d is neither 1 (the host's containerd 1.x) nor 2 (containerd 2 from BinDir)", o.Major)
	}
	return nil
}

// Containerd is one running containerd with its own root, state, sockets,
// runc root and cgroup root. Its fields are set by Start and read-only after;
// its methods are safe for concurrent use.
type Containerd struct {
	// Endpoint is the CRI endpoint, "unix://" + Address.
	Endpoint string
	// Address is the path of the gRPC socket (for ctr --address).
	Address string
	// PauseImage and BusyboxImage are the imported image references.
	PauseImage, BusyboxImage string
	// Namespace is the containerd namespace the CRI plugin and the images
	// use: "k8s.io".
	Namespace string
	// Dir is the instance's temporary directory; everything below is in it.
	Dir string
	// Root and State are containerd's root and state directories.
	Root, State string
	// RuncRoot is runc's state directory.
	RuncRoot string
	// IDMapHandler is the runtime handler whose runc can make ID-mapped
	// mounts, so that containerd reports user namespaces for it
	// (IDMapRuntimeHandler): on containerd 2 when the test binaries have
	// their runc; "" otherwise.
	IDMapHandler string
	// PodLogRoot is where SandboxConfig puts pod log directories.
	PodLogRoot string
	// Log is containerd's log file.
	Log string
	// Snapshotter is the snapshotter in use: "overlayfs" or "native".
	Snapshotter string
	// CgroupRoot is the cgroupfs path (relative to each hierarchy's root)
	// under which every CgroupParent lies; Stop removes it.
	CgroupRoot string
	// StartDuration is how long Start took.
	StartDuration time.Duration
	// Major is the running containerd's major version (Options.Major), and
	// RuntimeVersion the version its CRI Version call reports (Debian's
	// "1.6.20~ds1", "v2.4.2").
	Major          int
	RuntimeVersion string

	opts   Options
	bins   binaries
	config string // the config.toml path

	mu      sync.Mutex
	proc    *daemon // the current containerd process; nil before launch
	stopped bool    // Stop began: Restart refuses

	conn     *grpc.ClientConn
	ready    bool // the CRI service answered
	stopOnce sync.Once
	stopErr  error
}

// daemon is one containerd process: Restart replaces it.
type daemon struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been reaped
	waitErr error         // set before exited is closed
}

// daemon returns the current containerd process, or nil before launch.
func (c *Containerd) daemon() *daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

// Start starts a containerd of its own, waits until its CRI service answers,
// and imports the pause and busybox images. It returns an error wrapping
// ErrUnavailable when a prerequisite is missing. On any other error it has
// already cleaned up after itself.
func Start(ctx context.Context, opts Options) (*Containerd, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	begin := time.Now()
	bins, err := prerequisites(&opts)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.StartTimeout)
		defer cancel()
	}

	dir, err := os.MkdirTemp(opts.Dir, "nodekit-containerd-")
	if err != nil {
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	// Searchable by all, as /run/containerd is: a container in a user
	// namespace of its own, root an unprivileged host ID, must reach its
	// rootfs below State.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: %w", err)
	}
	c := &Containerd{
		Address:      filepath.Join(dir, "containerd.sock"),
		PauseImage:   PauseImage,
		BusyboxImage: BusyboxImage,
		Namespace:    "k8s.io",
		Dir:          dir,
		Root:         filepath.Join(dir, "root"),
		State:        filepath.Join(dir, "state"),
		RuncRoot:     filepath.Join(dir, "runc"),
		PodLogRoot:   filepath.Join(dir, "pods"),
		Log:          filepath.Join(dir, "containerd.log"),
		CgroupRoot:   "/" + filepath.Base(dir),
		Major:        opts.Major,
		opts:         opts,
		bins:         bins,
	}
	if bins.idmapRunc != "" {
		c.IDMapHandler = IDMapRuntimeHandler
	}
	c.Endpoint = "unix://" + c.Address
	if len(c.Address) > 100 {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("containerdtest: socket path %q is too long for a unix socket; use a shorter Options.Dir", c.Address)
	}
	if err := c.start(ctx, bins); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = fmt.Errorf("%w (and cleaning up: %v)", err, stopErr)
		}
		return nil, err
	}
	c.StartDuration = time.Since(begin)
	return c, nil
}

// binaries are the host programs the harness runs.
type binaries struct {
	containerd, ctr, runc, goTool, busybox string
	// idmapRunc is the test binaries' runc (ID-mapped mounts), "" when
	// absent: containerd 2's IDMapRuntimeHandler runs it.
	idmapRunc string
	// shim is containerd-shim-runc-v2; the containerd 2 config names it.
	shim string
}

func prerequisites(opts *Options) (binaries, error) {
	if opts.Major == 2 {
		return prerequisites2(opts)
	}
	var b binaries
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (running as uid "+fmt.Sprint(os.Geteuid())+")")
	}
	missing = b.look(missing, "containerd", &b.containerd)
	missing = b.look(missing, "containerd-shim-runc-v2", &b.shim)
	missing = b.hostTools(opts, missing)
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: missing %s; `make containerd` (hack/containerd-deps.sh, as root) provides them",
			ErrUnavailable, strings.Join(missing, ", "))
	}
	return b, nil
}

// look sets *dst to the program name found by lookPath, or adds name to
// missing.
func (b *binaries) look(missing []string, name string, dst *string) []string {
	p, err := lookPath(name)
	if err != nil {
		return append(missing, name)
	}
	*dst = p
	return missing
}

// hostTools finds what both containerd versions take from the machine:
// ctr (unless already set), runc, go and the static busybox; it returns
// missing with what is not there added.
func (b *binaries) hostTools(opts *Options, missing []string) []string {
	if b.ctr == "" {
		missing = b.look(missing, "ctr", &b.ctr)
	}
	missing = b.look(missing, "runc", &b.runc)
	missing = b.look(missing, "go", &b.goTool)
	if m := busybox(opts); m != "" {
		missing = append(missing, m)
	}
	b.busybox = opts.BusyboxPath
	return missing
}

// busybox sets opts.BusyboxPath to the default when it is empty and says
// what is missing, "" when the busybox is there.
func busybox(opts *Options) string {
	if opts.BusyboxPath == "" {
		opts.BusyboxPath = defaultBusybox()
	}
	if opts.BusyboxPath != "" && executable(opts.BusyboxPath) {
		return ""
	}
	where := opts.BusyboxPath
	if where == "" {
		where = filepath.Join(cacheDir(), "busybox", "*", "busybox")
	}
	return "a static busybox at " + where
}

// lookPath finds a program on PATH or in the sbin directories, which a
// non-login PATH often lacks (Debian installs runc in /usr/sbin).
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return filepath.Abs(p)
	}
	for _, dir := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func cacheDir() string {
	if d := os.Getenv("NODEKIT_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "nodekit")
}

// defaultBusybox returns $NODEKIT_BUSYBOX or the newest cached busybox.
func defaultBusybox() string {
	if p := os.Getenv("NODEKIT_BUSYBOX"); p != "" {
		return p
	}
	dir := cacheDir()
	if dir == "" {
		return ""
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "busybox", "*", "busybox"))
	var best string
	var bestTime time.Time
	for _, m := range matches {
		st, err := os.Stat(m)
		if err != nil || st.Mode()&0o111 == 0 {
			continue
		}
		if best == "" || st.ModTime().After(bestTime) {
			best, bestTime = m, st.ModTime()
		}
	}
	return best
}

func (c *Containerd) start(ctx context.Context, bins binaries) error {
	// Root and State searchable by all, as containerd makes its own
	// (/var/lib/containerd, /run/containerd): see Start.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{c.Root, 0o711}, {c.State, 0o711}, {c.RuncRoot, 0o700}, {c.PodLogRoot, 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("containerdtest: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("containerdtest: %w", err)
		}
	}
	c.Snapshotter = c.opts.Snapshotter
	if c.Snapshotter == "" {
		c.Snapshotter = "overlayfs"
		if err := probeOverlay(c.Dir); err != nil {
			c.Snapshotter = "native"
		}
	}

	// Build the images while containerd starts.
	layout := filepath.Join(c.Dir, "images.tar")
	built := make(chan error, 1)
	go func() { built <- buildImages(ctx, bins, c.Dir, layout) }()

	c.config = filepath.Join(c.Dir, "config.toml")
	if err := os.WriteFile(c.config, []byte(c.configTOML(bins)), 0o600); err != nil {
		<-built
		return fmt.Errorf("containerdtest: %w", err)
	}
	if err := c.launch(); err != nil {
		<-built
		return err
	}
	readyErr := c.waitReady(ctx)
	if readyErr == nil {
		readyErr = c.checkVersion(ctx)
	}
	buildErr := <-built
	if readyErr != nil {
		return readyErr
	}
	if buildErr != nil {
		return buildErr
	}
	return c.importImages(ctx, bins, layout)
}

// probeOverlay reports whether an overlay mount works below dir.
func probeOverlay(dir string) error {
	p, err := os.MkdirTemp(dir, "overlay-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(p)
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(p, d), 0o700); err != nil {
			return err
		}
	}
	data := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", filepath.Join(p, "lower"), filepath.Join(p, "upper"), filepath.Join(p, "work"))
	merged := filepath.Join(p, "merged")
	if err := syscall.Mount("overlay", merged, "overlay", 0, data); err != nil {
		return err
	}
	return syscall.Unmount(merged, 0)
}

// launch starts a containerd process on the instance's config and makes it
// the current one.
func (c *Containerd) launch() error {
	bins, config := c.bins, c.config
	logFile, err := os.OpenFile(c.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bins.containerd, "--config", config, "--log-level", c.opts.LogLevel)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = c.Dir
	// The shims containerd starts find runc and themselves on PATH.
	cmd.Env = append(os.Environ(), "PATH="+searchPath(bins))
	// Own process group, so signals to the test's group do not reach it;
	// killed if the thread that started it dies (the test binary crashed).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The goroutine holds its OS thread for containerd's lifetime, so the
	// parent-death signal fires only if the whole test process dies.
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return // the locked thread ends with the goroutine
		}
		started <- nil
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("containerdtest: starting containerd: %w", err)
	}
	c.mu.Lock()
	c.proc = d
	c.mu.Unlock()
	return nil
}

func searchPath(bins binaries) string {
	dirs := []string{filepath.Dir(bins.containerd), filepath.Dir(bins.runc)}
	dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
	dirs = append(dirs, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
	seen := map[string]bool{}
	var out []string
	for _, d := range dirs {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return strings.Join(out, string(filepath.ListSeparator))
}

// waitReady polls the CRI Version call until it answers, containerd exits or
// ctx ends.
func (c *Containerd) waitReady(ctx context.Context) error {
	if c.conn == nil {
		conn, err := grpc.NewClient(c.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("containerdtest: %w", err)
		}
		c.conn = conn
	}
	d := c.daemon()
	rt := runtimeapi.NewRuntimeServiceClient(c.conn)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if _, err := os.Stat(c.Address); err == nil {
			callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, last = rt.Version(callCtx, &runtimeapi.VersionRequest{})
			cancel()
			if last == nil {
				c.ready = true
				return nil
			}
			// Dial again at the next tick, not after gRPC's back-off
			// (up to 2m): after Restart the connection may have been
			// failing for a while.
			c.conn.ResetConnectBackoff()
			if status.Code(last) == codes.Unimplemented {
				// The socket serves but without the CRI service: the CRI
				// plugin failed to load and never will.
				return fmt.Errorf("containerdtest: containerd serves no CRI v1 service (its CRI plugin failed to load); log:\n%s", c.LogTail(40))
			}
		}
		select {
		case <-d.exited:
			return fmt.Errorf("containerdtest: containerd exited during start (%v); log:\n%s", d.waitErr, c.LogTail(40))
		case <-ctx.Done():
			return fmt.Errorf("containerdtest: containerd's CRI service did not answer (last error: %v): %w; log:\n%s", last, ctx.Err(), c.LogTail(40))
		case <-tick.C:
		}
	}
}

// LogTail returns the last n lines of containerd's log; of a containerd that
// crashed, the n lines from the crash's "fatal error:" or "panic:" line on
// (what failed and where, not the end of its goroutine dump).
func (c *Containerd) LogTail(n int) string {
	data, err := os.ReadFile(c.Log)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", c.Log, err)
	}
	return logTail(data, n)
}

func logTail(data []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	from := max(0, len(lines)-n)
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.HasPrefix(lines[i], []byte("fatal error: ")) || bytes.HasPrefix(lines[i], []byte("panic: ")) {
			from = i
			break
		}
	}
	return string(bytes.Join(lines[from:min(len(lines), from+n)], []byte("\n")))
}

// Conn returns the harness's gRPC connection to the CRI endpoint. Do not
// close it; Stop does.
func (c *Containerd) Conn() *grpc.ClientConn { return c.conn }

// RuntimeClient returns a CRI v1 runtime service client on Conn.
func (c *Containerd) RuntimeClient() runtimeapi.RuntimeServiceClient {
	return runtimeapi.NewRuntimeServiceClient(c.conn)
}

// ImageClient returns a CRI v1 image service client on Conn.
func (c *Containerd) ImageClient() runtimeapi.ImageServiceClient {
	return runtimeapi.NewImageServiceClient(c.conn)
}

// Ctr runs ctr with args against the instance, in its namespace, and
// returns what it wrote: for tests that reach past the CRI to containerd's
// own API (to list tasks, or to make a state the CRI cannot make).
func (c *Containerd) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, c.bins.ctr, append([]string{"--address", c.Address, "--namespace", c.Namespace}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("containerdtest: ctr %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// Pid returns containerd's process ID.
func (c *Containerd) Pid() int {
	d := c.daemon()
	if d == nil || d.cmd.Process == nil {
		return 0
	}
	return d.cmd.Process.Pid
}
