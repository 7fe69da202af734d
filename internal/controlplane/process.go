package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"time"
)

// process is one binary the control plane runs (etcd or kube-apiserver),
// its output appended to a log file in the control plane's directory. It can
// be started again after it stopped.
type process struct {
	name    string // binary name, also the log file's base name
	path    string
	args    []string
	logPath string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // cmd.Wait's result, set before done is closed
}

func newProcess(binDir, workDir, name string, args []string) *process {
	return &process{
		name:    name,
		path:    filepath.Join(binDir, name),
		args:    args,
		logPath: filepath.Join(workDir, name+".log"),
	}
}

// start starts the process. The goroutine that starts it stays locked to
// its OS thread until the process has been reaped: on Linux the child gets
// SIGKILL when that thread ends (so when the test binary dies, however it
// dies), and the Go runtime would otherwise be free to end the thread early.
func (p *process) start() error {
	if p.running() {
		return fmt.Errorf("%s is already running", p.name)
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setParentDeathSignal(cmd.SysProcAttr)
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the
		// child has been reaped.
		defer close(done)
		defer log.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-done
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, done
	return nil
}

func (p *process) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// pid returns the process's ID, or 0 when it is not running.
func (p *process) pid() int {
	if !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// errExited is wrapped by exited's error.
var errExited = errors.New("exited")

// exited returns an error saying that the process ended, with its exit
// status and the end of its log, or nil while it runs.
func (p *process) exited() error {
	if p.done == nil || p.running() {
		return nil
	}
	return fmt.Errorf("%s %w (%v); end of %s:\n%s", p.name, errExited, p.err, p.logPath, p.logTail(2048))
}

// stop sends SIGTERM and waits up to grace for the process to exit, then
// sends SIGKILL and waits up to a further killWait. It returns an error only
// when the process could not be stopped at all; a process that needed
// SIGKILL is stopped all the same.
func (p *process) stop(grace time.Duration) error {
	if !p.running() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	t.Reset(killWait)
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("%s (pid %d) did not exit within %v of SIGKILL", p.name, p.cmd.Process.Pid, killWait)
	}
}

// killWait bounds the wait for a process to be reaped after SIGKILL.
const killWait = 10 * time.Second

// logTail returns up to n bytes from the end of the process's log.
func (p *process) logTail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}
